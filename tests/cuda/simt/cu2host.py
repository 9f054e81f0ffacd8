#!/usr/bin/env python3
"""cu2host.py IN.cu OUT.cc - rewrites a CUDA source for the SIMT host runtime (simt.h).

Two constructs are not C++ and change: a launch `kernel<<<grid, block[, smem[, stream]]>>>(args)`
becomes `::simt::launch(grid, block[, smem[, stream]]).run(kernel, args)`, and a declaration of
dynamic shared memory `extern __shared__ [__align__(n)] T name[];` becomes a pointer to the
launch's dynamic shared memory. A `#line` keeps compiler messages pointing at the .cu file.
Anything else passes through unchanged; a `<<<` left over is an error."""
import re
import sys

LAUNCH = re.compile(r'([A-Za-z_][\w:]*(?:<[^<>;()]*>)?)\s*<<<(.*?)>>>\s*\(\s*(\)?)', re.S)
DYN = re.compile(r'extern\s+__shared__\s+(?:__align__\(\s*\d+\s*\)\s+)?([\w:]+)\s+(\w+)\s*\[\s*\]\s*;')


def launch(m):
    kernel, config, empty = m.group(1), m.group(2), m.group(3)
    head = '::simt::launch(%s).run(%s' % (config, kernel)
    return head + ')' if empty else head + ', '


def main():
    src_path, out_path = sys.argv[1], sys.argv[2]
    with open(src_path) as f:
        src = f.read()
    out = LAUNCH.sub(launch, src)
    out = DYN.sub(lambda m: '%s *%s = static_cast<%s *>(::simt::dyn_shared());'
                  % (m.group(1), m.group(2), m.group(1)), out)
    if '<<<' in out:
        sys.exit('cu2host: %s: a launch it cannot rewrite' % src_path)
    with open(out_path, 'w') as f:
        f.write('#line 1 "%s"\n' % src_path)
        f.write(out)


if __name__ == '__main__':
    main()
