// Package transportsuite holds the tests of workers on real transports (Redis Streams, Amazon
// SQS against a local server): exactly-once under faults, acknowledgement after the outcome is
// committed, limits, outages. It is a module of its own, so that the Redis and AWS clients they
// need are not in the taskorch module's requirements; it has no code but these tests.
package transportsuite
