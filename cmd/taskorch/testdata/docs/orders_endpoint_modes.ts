// The test's driver of docs/typescript.md's endpoint (TestE2EDocTypeScript): the document's serve,
// verify and run (orders_endpoint.ts, written beside this file by the test) with a work function
// that answers as the task's payload says, and prints one JSON line per call of the work.
import { Refuse, serve, TryLater, type Task } from "./orders_endpoint.js";

const calls = new Map<number, number>();

function work(task: Task) {
  const n = (calls.get(task.task_id) ?? 0) + 1;
  calls.set(task.task_id, n);
  console.log(JSON.stringify({ event: "work", task_id: task.task_id, call: n, attempt: task.attempt }));
  const mode = task.payload.mode;
  if (mode === "429-then-ok" && n === 1) throw new TryLater(1);
  if (mode === "error-then-ok" && n === 1) throw new Error("the database is on fire");
  if (mode === "refuse") throw new Refuse("no such order");
  return { mode, calls: n };
}

const secrets = (process.env.TASKORCH_HTTP_TARGET_SECRETS ?? "").split(",").filter(Boolean);
serve(work, Number(process.env.PORT ?? "0"), secrets);
