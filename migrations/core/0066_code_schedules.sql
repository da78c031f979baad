-- Periodic tasks declared in code (docs/worker.md, "Periodic tasks declared in code"): a Go
-- program lists its schedules in WorkerConfig.Periodic, and its worker, when it becomes the
-- leader, makes the schedules declared in code exactly those (queues.declare_schedules).
--
-- queues.schedule.declared_in_code tells them from the schedules added by hand (add_schedule,
-- `taskorch schedules add`), which declare_schedules never changes or removes; `taskorch
-- schedules list` shows which is which (SOURCE).

alter table queues.schedule add column declared_in_code boolean not null default false;
comment on column queues.schedule.declared_in_code is
    'True for a schedule a worker''s code declares (WorkerConfig.Periodic), kept by queues.declare_schedules; false for one added with add_schedule.';
