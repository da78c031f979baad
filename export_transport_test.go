package taskorch

import "github.com/taskorch/taskorch/internal/transport"

// SetTestTransport makes a worker made with cfg use tr (a transport with faults injected, or
// one with test credentials) instead of the one cfg.Transport names.
func SetTestTransport(cfg *WorkerConfig, tr transport.Transport) { cfg.testTransport = tr }
