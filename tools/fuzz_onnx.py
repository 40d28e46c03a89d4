"""Run graphfuse's ONNX differential fuzzer: `python tools/fuzz_onnx.py --minutes 30`.

A thin command over graphfuse.testing.fuzz.onnx_fuzz (`--help` lists the options); `make fuzz
MINUTES=30` runs it into build/fuzz and leaves build/fuzz/report.txt.
"""

from graphfuse.testing.fuzz.onnx_fuzz import main

if __name__ == "__main__":
    raise SystemExit(main())
