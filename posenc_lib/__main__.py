"""python -m posenc_lib inspect CONFIG.json [--json] [--plot FILE.png]: a model's RoPE from its config.json
(the same as the ``posenc-inspect`` command; ``posenc_lib.rope_inspect``)."""
from __future__ import annotations

import sys

COMMANDS = ("inspect",)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in COMMANDS:
        print(f"usage: python -m posenc_lib {{{','.join(COMMANDS)}}} ... (try: python -m posenc_lib inspect --help)",
              file=sys.stderr)
        return 2
    from .rope_inspect import main as inspect_main

    return inspect_main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
