"""A test file (for test-tests) that writes into the kit's records file, which the kit's driver
fills in the same process: lines that are JSON but not records, of every wrong shape."""
import gc
import io

from solution import causal_mask


def test_writes_records():
    for obj in gc.get_objects():
        if isinstance(obj, io.TextIOWrapper) and str(getattr(obj, "name", "")).endswith(".jsonl"):
            for line in ('{"event": "result"}', '[1, 2]', '{"event": "collected", "names": 5}',
                         '{"event": "result", "name": "x", "outcome": "pass", "message": 1, "where": "",'
                         ' "output": "", "seconds": 0}', '"\\u001b[2J"'):
                obj.write(line + "\n")
            obj.flush()
    assert causal_mask(1, 2)[0][0][1] in (False, 0)
