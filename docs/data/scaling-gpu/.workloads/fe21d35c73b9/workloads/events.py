"""Event log and final-record writing.

Events are flushed and fsynced one by one, because the host reads this file to
tell a hang from slow progress and to keep the epochs that finished before a
crash: anything still in a buffer when a process segfaults is lost.
"""
import json
import os
import time


class EventLog(object):
    def __init__(self, path):
        self.path = path
        self.t0 = time.time()
        self._fh = open(path, "a")

    def emit(self, event, **fields):
        record = {"event": event, "t": round(time.time() - self.t0, 4), "wall": time.time()}
        record.update(fields)
        self._fh.write(json.dumps(record, sort_keys=True, default=str) + "\n")
        self._fh.flush()
        try:
            os.fsync(self._fh.fileno())
        except OSError:
            pass

    def close(self):
        self._fh.close()


def write_json_atomic(path, data):
    """Write JSON so that a reader never sees half a file."""
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(data, fh, indent=2, sort_keys=True, default=str)
        fh.flush()
        os.fsync(fh.fileno())
    os.rename(tmp, path)
