package taskorch

import "github.com/taskorch/taskorch/transport"

// SetTestTransport makes a worker made with cfg use tr (a transport with faults injected, or
// one with test credentials): it sets cfg.Transport, which tests may also set directly.
func SetTestTransport(cfg *WorkerConfig, tr transport.Transport) { cfg.Transport = tr }

// Transport names, for tests that run one scenario per transport. The package has no such
// constants: a transport is a value (WorkerConfig.Transport), named by its Name method.
const (
	TransportPostgres = "postgres"
	TransportRedis    = "redis" // redisstream.Name
	TransportSQS      = "sqs"   // sqs.Name
)
