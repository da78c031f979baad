# The test's driver of docs/python.md's endpoint (TestE2EDocPython): the document's serve, verify
# and run (orders_endpoint.py, written beside this file by the test) with a work function that
# answers as the task's payload says, and prints one JSON line per call of the work.
import json, os, threading

import orders_endpoint as ep

calls, guard = {}, threading.Lock()


def work(task):
    with guard:  # one thread at a time: print writes the line and its newline separately
        n = calls[task["task_id"]] = calls.get(task["task_id"], 0) + 1
        print(json.dumps({"event": "work", "task_id": task["task_id"], "call": n, "attempt": task["attempt"]}), flush=True)
    mode = task["payload"].get("mode")
    if mode == "429-then-ok" and n == 1:
        raise ep.TryLater(1)
    if mode == "error-then-ok" and n == 1:
        raise RuntimeError("the database is on fire")
    if mode == "refuse":
        raise ep.Refuse("no such order")
    return {"mode": mode, "calls": n}


secrets = [s.strip() for s in os.environ["TASKORCH_HTTP_TARGET_SECRETS"].split(",") if s.strip()]
ep.serve(work, int(os.environ.get("PORT", "0")), secrets)
