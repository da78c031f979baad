-- With the accounts set, a file deletion names the account deletion that started it (its file's
-- owner's): the process registry reads the instances of files.file_deletion from
-- files.file_deletion_account_instances (views/files/file_deletion_account_instances.sql), which
-- this set defines over the files set's files.file_deletion_instances. Before, this set
-- redefined files.file_deletion_instances itself, so that the view had two definitions, one per
-- set, and whichever set's migration ran last decided which was live; the files set's view is
-- its own again. queues.register_process keeps the view when it registers the process again.
update queues.process set instances_view = 'file_deletion_account_instances'
where process_schema = 'files' and process_name = 'file_deletion';
