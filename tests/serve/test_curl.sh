#!/bin/sh
# test_curl.sh NSCTL SERVE_MODEL - nsctl serve over plain HTTP with curl: the API key on every
# path (/health too), 404 / 405 / 413 / malformed bodies with OpenAI's error object, the raw
# server-sent events of a stream (data: lines of JSON, then data: [DONE]), the content types,
# and SIGTERM: exit 0 with no shared memory or runtime directory left.
# Exit 0 pass, 1 fail, 77 oracle or curl missing (fail when CI=true).
set -u
NSCTL=$1
TOOL=$2
missing() {
	echo "$1"
	[ "${CI:-}" = true ] && exit 1
	exit 77
}
[ -f "${NS_ORACLE_DIR:-}/tiny/tiny-qwen3-Q4_K_M.gguf" ] || missing "oracle data missing"
command -v curl >/dev/null 2>&1 || missing "curl is not installed"
T=$(mktemp -d /tmp/ns_serve_curl.XXXXXX)
MODEL=$T/curlq3.gguf
ERR=$T/server.err
PID=
cleanup() {
	[ -n "$PID" ] && kill -9 "$PID" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*"
	echo "--- server stderr:"
	cat "$ERR"
	exit 1
}
"$TOOL" "$NS_ORACLE_DIR/tiny/tiny-qwen3-Q4_K_M.gguf" "$MODEL" qwen3 || fail "model copy"
"$NSCTL" serve "$MODEL" --port 0 --no-plan --threads 1 -c 512 --api-key k9 \
	--max-body 4KB 2>"$ERR" &
PID=$!
i=0
while ! grep -q "listening on" "$ERR"; do
	i=$((i + 1))
	[ $i -gt 600 ] && fail "the server did not start"
	kill -0 "$PID" 2>/dev/null || fail "the server exited"
	sleep 0.1
done
URL=$(sed -n 's/.*listening on \(http:[^ ]*\)\/v1.*/\1/p' "$ERR")
SESSION=$(sed -n 's/.*session \([A-Za-z0-9_]*\):.*/\1/p' "$ERR")
AUTH="Authorization: Bearer k9"

# $1 want status, $2 want in the body, then curl arguments
check() {
	want=$1
	grep_for=$2
	shift 2
	code=$(curl -s -o "$T/body" -w '%{http_code}' "$@")
	[ "$code" = "$want" ] || fail "curl $*: status $code, want $want: $(cat "$T/body")"
	grep -q -- "$grep_for" "$T/body" || fail "curl $*: body lacks $grep_for: $(cat "$T/body")"
	python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$T/body" ||
		fail "curl $*: the body is not JSON: $(cat "$T/body")"
}

check 401 '"code":"invalid_api_key"' "$URL/health"
check 401 '"type":"invalid_request_error"' -H "Authorization: Bearer k8" "$URL/v1/models"
check 200 '"status":"ok"' -H "$AUTH" "$URL/health"
check 200 '"id":"curlq3"' -H "$AUTH" "$URL/v1/models"
check 404 '"code":"unknown_url"' -H "$AUTH" "$URL/v1/embeddings"
check 405 '"code":"method_not_allowed"' -H "$AUTH" -X DELETE "$URL/v1/models"
check 405 '"code":"method_not_allowed"' -H "$AUTH" "$URL/v1/chat/completions"
check 400 '"code":"invalid_json"' -H "$AUTH" -d '{"model": "curlq3", ' "$URL/v1/completions"
check 400 '"code":"invalid_json"' -H "$AUTH" -d '[1, 2]' "$URL/v1/completions"
check 400 '"code":"invalid_json"' -H "$AUTH" -d '{"model":"curlq3","model":"x","prompt":"a"}' \
	"$URL/v1/completions"
check 400 '"param":"prompt"' -H "$AUTH" -d '{"model":"curlq3","prompt":7}' "$URL/v1/completions"
check 400 '"param":"max_tokens"' -H "$AUTH" -d '{"model":"curlq3","prompt":"a","max_tokens":-1}' \
	"$URL/v1/completions"
check 400 '"param":"messages\[0\]"' -H "$AUTH" \
	-d '{"model":"curlq3","messages":[{"role":"user","content":"a","tool_calls":[]}]}' \
	"$URL/v1/chat/completions"
check 400 '"code":"unsupported_content"' -H "$AUTH" -d '{"model":"curlq3","messages":[{"role":
	"user","content":[{"type":"image_url","image_url":{"url":"data:,"}}]}]}' \
	"$URL/v1/chat/completions"
python3 -c 'import json; print(json.dumps({"model": "curlq3", "prompt": "x" * 5000}))' \
	>"$T/big.json"
check 413 '"code":"request_too_large"' -H "$AUTH" --data-binary "@$T/big.json" \
	"$URL/v1/completions"
echo "errors: 401 on every path without the key, 404, 405, 400 (JSON, types, fields), 413"

# a stream as it goes over the wire
curl -sN -D "$T/headers" -H "$AUTH" -d '{"model":"curlq3","prompt":"Hi","max_tokens":6,
	"temperature":0,"ignore_eos":true,"stream":true}' "$URL/v1/completions" >"$T/sse" ||
	fail "stream request"
grep -qi '^content-type: text/event-stream' "$T/headers" || fail "stream content type"
curl -s -H "$AUTH" -d '{"model":"curlq3","prompt":"Hi","max_tokens":6,"temperature":0,
	"ignore_eos":true}' "$URL/v1/completions" >"$T/whole" || fail "whole request"
python3 - "$T/sse" "$T/whole" <<'EOF' || fail "stream framing: $(cat "$T/sse")"
import json, sys
events = open(sys.argv[1]).read().split("\n\n")
assert events[-1] == "", "the stream does not end with a blank line"
events = events[:-1]
assert all(e.startswith("data: ") and "\n" not in e for e in events), events
assert events[-1] == "data: [DONE]", events[-1]
chunks = [json.loads(e[6:]) for e in events[:-1]]
assert len(chunks) >= 3, len(chunks)  # text as it comes, then the finish_reason
whole = json.load(open(sys.argv[2]))
assert "".join(c["choices"][0]["text"] for c in chunks) == whole["choices"][0]["text"]
assert all(c["object"] == "text_completion" for c in chunks)
assert chunks[-1]["choices"][0]["finish_reason"] == "length"
assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])
assert len({c["id"] for c in chunks}) == 1
EOF
curl -s -D "$T/headers" -o /dev/null -H "$AUTH" "$URL/v1/models"
grep -qi '^content-type: application/json' "$T/headers" || fail "JSON content type"
echo "stream: data: events of JSON adding up to the whole text, the finish, then data: [DONE]"

kill -TERM "$PID"
wait "$PID"
rc=$?
PID=
[ "$rc" = 0 ] || fail "SIGTERM: exit $rc, want 0"
grep -q "session removed" "$ERR" || fail "no shutdown line"
ls /dev/shm | grep -q "$SESSION" && fail "shared memory of session $SESSION left"
ls -d /tmp/*"$SESSION"* "${XDG_RUNTIME_DIR:-/nonexistent}"/*"$SESSION"* 2>/dev/null | grep -q . &&
	fail "runtime dir of $SESSION left"
echo "SIGTERM: exit 0, no segment or runtime dir left"
exit 0
