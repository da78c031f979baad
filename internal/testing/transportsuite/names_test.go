package transportsuite_test

// Transport names, for tests that run one scenario per transport. Package taskorch has no such
// constants: a transport is a value (WorkerConfig.Transport), named by its Name method.
const (
	transportPostgres = "postgres"
	transportRedis    = "redis" // redisstream.Name
	transportSQS      = "sqs"   // sqs.Name
)
