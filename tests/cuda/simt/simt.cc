/* simt.cc - the fiber scheduler behind simt.h.
 *
 * Each thread of a block is a fiber with its own stack. A fiber is entered the first time with
 * setcontext (makecontext gives it its stack and entry); from then on the scheduler and the
 * fibers switch with _setjmp/_longjmp, which do not touch the signal mask (swapcontext makes a
 * system call per switch, and a kernel switches a few times per shuffle). Built without
 * _FORTIFY_SOURCE: its longjmp check refuses jumps between stacks, which is all this does. */
#undef _FORTIFY_SOURCE
#include "simt.h"

#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <sys/mman.h>
#include <ucontext.h>

namespace simt {
namespace {

constexpr size_t STACK_BYTES = 256 * 1024;
constexpr unsigned MAX_THREADS = 1024;

enum class state { fresh, ready, at_block, at_warp, at_named, done };

struct fiber {
	jmp_buf ctx;
	ucontext_t uc;
	state st;
	unsigned gen; /* generation of the barrier it waits at */
	unsigned named; /* at_named: the barrier's id */
	bool started;   /* entered once: later blocks resume it in entry's loop */
	uint64_t shuffles; /* shuffles made in this block: picks warp_exchange's slot set */
	uint3 tid;
	char *stack;
};

struct barrier {
	unsigned arrived = 0, live = 0, gen = 0;
};

struct launch_state {
	std::vector<fiber> fibers;
	std::vector<barrier> warps;
	std::vector<uint64_t> slots; /* two per thread, for shuffles (warp_exchange) */
	barrier block;
	barrier named[16];  /* bar.sync 1..15 (live: the count of the current round) */
	bool reverse;       /* this block runs its threads last to first (see execute) */
	jmp_buf sched;
	fiber *cur = nullptr;
	void (*body)(void *) = nullptr;
	void *ctx = nullptr;
	unsigned char *dyn = nullptr;
};

/* the launch in progress (one at a time, see simt.h) */
launch_state *g_run;
/* Launches so far. Blocks alternate the order their threads run between barriers (first to
 * last, last to first; and from launch to launch for one-block grids), so a read of another
 * thread's shared or global write that lacks a barrier in between finds the write missing in
 * one of the two orders, whichever thread is the writer. */
uint64_t g_launches;

[[noreturn]] void die(const char *what)
{
	std::fprintf(stderr, "simt: %s (block %u,%u,%u thread %u,%u,%u)\n", what,
		     regs.block_idx.x, regs.block_idx.y, regs.block_idx.z, regs.thread_idx.x,
		     regs.thread_idx.y, regs.thread_idx.z);
	std::abort();
}

/* fiber stacks, kept from launch to launch: mmap'd (lazily committed, and untouched by
 * MALLOC_PERTURB_, which would fill every one at every launch) */
std::vector<char *> g_stacks;

char *stack_for(size_t i)
{
	while (g_stacks.size() <= i) {
		void *p = mmap(nullptr, STACK_BYTES, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (p == MAP_FAILED)
			die("cannot map a fiber stack");
		g_stacks.push_back(static_cast<char *>(p));
	}
	return g_stacks[i];
}

unsigned linear(const uint3 &t, const dim3 &b)
{
	return (t.z * b.y + t.y) * b.x + t.x;
}

/* back to the scheduler; returns when the scheduler resumes this fiber */
void yield()
{
	launch_state *r = g_run;

	if (!_setjmp(r->cur->ctx))
		_longjmp(r->sched, 1);
}

void arrive(barrier &b, fiber *f, state st)
{
	f->st = st;
	f->gen = b.gen;
	if (++b.arrived == b.live) {
		b.arrived = 0;
		b.gen++;
	}
	yield();
	f->st = state::ready;
}

/* an exited thread no longer counts: the barrier it would have completed completes */
void leave(barrier &b)
{
	b.live--;
	if (b.arrived && b.arrived == b.live) {
		b.arrived = 0;
		b.gen++;
	}
}

/* A fiber lives for the whole launch: it runs the kernel once per block, parking between
 * blocks, so only the first block pays for makecontext and setcontext (system calls). */
void entry()
{
	for (;;) {
		launch_state *r = g_run;

		r->body(r->ctx);
		fiber *f = r->cur;
		f->st = state::done;
		leave(r->block);
		leave(r->warps[linear(f->tid, regs.block_dim) / 32]);
		if (!_setjmp(f->ctx))
			_longjmp(r->sched, 1);
	}
}

bool waiting(const launch_state &r, const fiber &f, unsigned idx)
{
	switch (f.st) {
	case state::at_block:
		return r.block.gen == f.gen;
	case state::at_warp:
		return r.warps[idx / 32].gen == f.gen;
	case state::at_named:
		return r.named[f.named].gen == f.gen;
	case state::done:
		return true;
	default:
		return false;
	}
}

/* getcontext returns twice: its own frame (see resume) */
__attribute__((noinline)) void prepare(fiber &f)
{
	if (getcontext(&f.uc))
		die("getcontext failed");
	f.uc.uc_stack.ss_sp = f.stack;
	f.uc.uc_stack.ss_size = STACK_BYTES;
	f.uc.uc_link = nullptr;
	makecontext(&f.uc, entry, 0);
}

/* runs f until it yields or exits; its own frame, so the caller's locals survive the jumps */
__attribute__((noinline)) void resume(launch_state &r, fiber &f)
{
	r.cur = &f;
	regs.thread_idx = f.tid;
	if (_setjmp(r.sched))
		return;
	if (!f.started) {
		f.started = true;
		f.st = state::ready;
		setcontext(&f.uc);
		die("setcontext failed");
	}
	_longjmp(f.ctx, 1);
}

void run_block(launch_state &r, unsigned n)
{
	const unsigned n_warps = (n + 31) / 32;

	r.block = barrier{};
	r.block.live = n;
	for (barrier &b : r.named)
		b = barrier{};
	for (unsigned w = 0; w < n_warps; w++) {
		r.warps[w] = barrier{};
		r.warps[w].live = w + 1 < n_warps || n % 32 == 0 ? 32 : n % 32;
	}
	for (unsigned i = 0; i < n; i++) {
		r.fibers[i].shuffles = 0;
		if (r.fibers[i].st == state::fresh)
			prepare(r.fibers[i]);
		else
			r.fibers[i].st = state::ready; /* parked in entry's loop */
	}
	unsigned left = n;
	while (left) {
		bool ran = false;

		for (unsigned k = 0; k < n; k++) {
			const unsigned i = r.reverse ? n - 1 - k : k;
			fiber &f = r.fibers[i];

			if (waiting(r, f, i))
				continue;
			ran = true;
			resume(r, f);
			if (f.st == state::done)
				left--;
		}
		if (!ran)
			die("deadlock: threads wait at barriers that cannot complete");
	}
}

} /* namespace */

void sync_block()
{
	if (!g_run)
		die("__syncthreads outside a kernel");
	arrive(g_run->block, g_run->cur, state::at_block);
}

void sync_warp()
{
	if (!g_run)
		die("__syncwarp outside a kernel");
	fiber *f = g_run->cur;
	arrive(g_run->warps[linear(f->tid, regs.block_dim) / 32], f, state::at_warp);
}

/* Two slot sets, used by alternate shuffles: a lane can only write set p again (two shuffles
 * later) after passing the barrier of the shuffle in between, which every lane reaches only
 * after reading set p. So one warp barrier per shuffle, not two. */
uint64_t warp_exchange(uint64_t mine, int src)
{
	if (!g_run)
		die("shuffle outside a kernel");
	fiber *f = g_run->cur;
	const unsigned me = linear(f->tid, regs.block_dim), n = (unsigned)g_run->fibers.size();
	const unsigned base = me & ~31u;
	uint64_t *set = g_run->slots.data() + (f->shuffles++ & 1) * n;

	set[me] = mine;
	sync_warp();
	return src >= 0 && src < 32 && base + (unsigned)src < n ? set[base + (unsigned)src] : mine;
}

void named_barrier(unsigned id, unsigned count)
{
	if (!g_run)
		die("bar.sync outside a kernel");
	if (id == 0 || id >= 16 || count == 0 || count % 32)
		die("named barrier: bad id or count");
	barrier &b = g_run->named[id];
	fiber *f = g_run->cur;

	if (b.arrived && b.live != count)
		die("named barrier: threads arrive with different counts");
	b.live = count;
	f->named = id;
	arrive(b, f, state::at_named);
}

void *dyn_shared()
{
	if (!g_run)
		die("dynamic shared memory outside a kernel");
	return g_run->dyn;
}

void check_mask(unsigned mask)
{
	if (mask != 0xffffffffu)
		die("only full-warp masks are modelled");
}

cudaError_t execute(dim3 grid, dim3 block, size_t dyn_bytes, void (*body)(void *), void *ctx)
{
	const uint64_t n = (uint64_t)block.x * block.y * block.z;

	if (g_run)
		die("a launch from inside a kernel");
	if (n == 0 || n > MAX_THREADS || block.z > 64 || grid.x == 0 || grid.y == 0 ||
	    grid.z == 0 || grid.y > 65535 || grid.z > 65535 || dyn_bytes > 227 * 1024)
		return cudaErrorInvalidConfiguration;
	launch_state r;
	r.fibers.resize(n);
	r.warps.resize((n + 31) / 32);
	r.slots.assign(2 * n, 0);
	r.body = body;
	r.ctx = ctx;
	std::vector<unsigned char> dyn(dyn_bytes + 16);
	r.dyn = dyn.data() + ((16 - ((uintptr_t)dyn.data() & 15)) & 15);
	for (uint64_t i = 0; i < n; i++) {
		fiber &f = r.fibers[i];

		f.st = state::fresh;
		f.started = false;
		f.stack = stack_for(i);
		f.tid = uint3{ (unsigned)(i % block.x), (unsigned)(i / block.x % block.y),
			       (unsigned)(i / ((uint64_t)block.x * block.y)) };
	}
	regs.block_dim = block;
	regs.grid_dim = grid;
	g_run = &r;
	for (unsigned z = 0; z < grid.z; z++)
		for (unsigned y = 0; y < grid.y; y++)
			for (unsigned x = 0; x < grid.x; x++) {
				regs.block_idx = uint3{ x, y, z };
				r.reverse = (g_launches + x + y + z) & 1;
				run_block(r, (unsigned)n);
			}
	g_run = nullptr;
	g_launches++;
	return cudaSuccess;
}

} /* namespace simt */
