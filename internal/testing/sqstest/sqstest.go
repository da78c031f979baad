// Package sqstest is a local SQS server for tests: an HTTP server on 127.0.0.1 that speaks the
// part of the SQS JSON protocol (AWS JSON 1.0, "X-Amz-Target: AmazonSQS.<Operation>") taskorch
// uses, so that the real AWS SDK for Go v2 talks to it through an endpoint override:
// CreateQueue, GetQueueUrl, SendMessage, SendMessageBatch, ReceiveMessage (visibility timeout,
// long polling with WaitTimeSeconds), DeleteMessage, DeleteMessageBatch,
// ChangeMessageVisibility and ChangeMessageVisibilityBatch.
//
// Delivery is at least once, as SQS's standard queues: a message received and not deleted
// within its visibility timeout is delivered again; deleting with an older receipt handle than
// the latest is accepted and does nothing. Faults drops, duplicates and delays messages at send.
//
// It is a test double of SQS's behaviour, not of its limits or its authentication: signatures
// are not checked, and there is no dead-letter queue, FIFO queue or message attribute.
package sqstest

import (
	"container/heap"
	"crypto/md5" //nolint:gosec // SQS's body checksum is MD5
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Faults says how often the server misdelivers a sent message, each a probability in [0, 1].
type Faults struct {
	// Drop: the send succeeds but the message is never stored (a lost message).
	Drop float64
	// Duplicate: the message is stored twice (two deliveries).
	Duplicate float64
	// Delay: the message becomes visible DelayBy after it was sent.
	Delay float64
	// DelayBy is how late a delayed message becomes visible. Defaults to 500ms.
	DelayBy time.Duration
	// Seed makes the faults repeatable.
	Seed uint64
}

// Counts is what the server did.
type Counts struct {
	Sent, Received, Deleted, Dropped, Duplicated, Delayed, Redelivered int64
}

// Server is a local SQS server. Start it with Start.
type Server struct {
	// URL is the endpoint to give the SDK (BaseEndpoint), http://127.0.0.1:PORT.
	URL string

	srv *http.Server
	ln  net.Listener

	mu     sync.Mutex
	queues map[string]*queue // by name
	faults Faults
	rnd    *rand.Rand

	sent, received, deleted, dropped, duplicated, delayed, redelivered atomic.Int64
}

// Start starts a server for t, stopped when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("sqstest: listen: %v", err)
	}
	s := &Server{URL: "http://" + ln.Addr().String(), ln: ln, queues: map[string]*queue{}, rnd: rand.New(rand.NewPCG(1, 2))} //nolint:gosec // test faults
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	t.Cleanup(func() { _ = s.srv.Close() })
	return s
}

// SetFaults sets the faults applied to messages sent from now on.
func (s *Server) SetFaults(f Faults) {
	if f.DelayBy <= 0 {
		f.DelayBy = 500 * time.Millisecond
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = f
	s.rnd = rand.New(rand.NewPCG(f.Seed, f.Seed^0x9e3779b97f4a7c15)) //nolint:gosec // test faults
}

// CreateQueue creates a queue (or finds it) and returns its URL.
func (s *Server) CreateQueue(name string, visibility time.Duration) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.createQueue(name, visibility).url
}

// Counts returns what the server did so far.
func (s *Server) Counts() Counts {
	return Counts{Sent: s.sent.Load(), Received: s.received.Load(), Deleted: s.deleted.Load(),
		Dropped: s.dropped.Load(), Duplicated: s.duplicated.Load(), Delayed: s.delayed.Load(), Redelivered: s.redelivered.Load()}
}

// Depth returns how many messages the queue holds (visible, in flight or delayed).
func (s *Server) Depth(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[name]
	if q == nil {
		return 0
	}
	return len(q.msgs)
}

// The model ------------------------------------------------------------------------------------

type message struct {
	id, body, md5 string
	receipt       string    // the latest receipt handle; "" before the first receive
	visibleAt     time.Time // zero: visible (in the ready list); else invisible until then
	receives      int
	gen           int // bumped whenever visibleAt changes: stale heap entries are skipped
}

type queue struct {
	name, url  string
	visibility time.Duration
	msgs       map[string]*message // by message id
	byReceipt  map[string]*message
	ready      []*message // visible, oldest first (best-effort order, as SQS's standard queues)
	hidden     hiddenHeap // in flight or delayed, by visibleAt
	changed    chan struct{}
}

type hiddenEntry struct {
	at  time.Time
	m   *message
	gen int
}

type hiddenHeap []hiddenEntry

func (h hiddenHeap) Len() int           { return len(h) }
func (h hiddenHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h hiddenHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *hiddenHeap) Push(x any)        { *h = append(*h, x.(hiddenEntry)) }
func (h *hiddenHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

func (s *Server) createQueue(name string, visibility time.Duration) *queue {
	if q := s.queues[name]; q != nil {
		return q
	}
	if visibility <= 0 {
		visibility = 30 * time.Second
	}
	q := &queue{name: name, url: s.URL + "/000000000000/" + name, visibility: visibility,
		msgs: map[string]*message{}, byReceipt: map[string]*message{}, changed: make(chan struct{})}
	s.queues[name] = q
	return q
}

// wakeReceivers wakes long polls waiting on q. Call with s.mu held.
func (q *queue) wakeReceivers() {
	close(q.changed)
	q.changed = make(chan struct{})
}

// hide makes m invisible until at. Call with s.mu held.
func (q *queue) hide(m *message, at time.Time) {
	m.gen++
	m.visibleAt = at
	heap.Push(&q.hidden, hiddenEntry{at: at, m: m, gen: m.gen})
}

// surface moves the messages whose invisibility has ended back to ready and returns when the
// next one ends (zero: none). Call with s.mu held.
func (q *queue) surface(now time.Time, redelivered *atomic.Int64) time.Time {
	for q.hidden.Len() > 0 {
		e := q.hidden[0]
		if e.m.gen != e.gen || q.msgs[e.m.id] != e.m {
			heap.Pop(&q.hidden) // stale: the message was deleted or hidden again
			continue
		}
		if e.at.After(now) {
			return e.at
		}
		heap.Pop(&q.hidden)
		e.m.visibleAt = time.Time{}
		if e.m.receives > 0 {
			redelivered.Add(1)
		}
		q.ready = append(q.ready, e.m)
	}
	return time.Time{}
}

func newID() string {
	b := make([]byte, 16)
	_, _ = crand.Read(b)
	return hex.EncodeToString(b)
}

func md5Hex(s string) string {
	sum := md5.Sum([]byte(s)) //nolint:gosec // SQS's body checksum
	return hex.EncodeToString(sum[:])
}

// The protocol ---------------------------------------------------------------------------------

type apiError struct {
	status int
	typ    string // the shape name, e.g. QueueDoesNotExist
	query  string // the query-compatible code, e.g. AWS.SimpleQueueService.NonExistentQueue
	msg    string
}

func errorf(status int, typ, query, format string, args ...any) *apiError {
	return &apiError{status: status, typ: typ, query: query, msg: fmt.Sprintf(format, args...)}
}

// ServeHTTP answers one AWS JSON 1.0 request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	target := r.Header.Get("X-Amz-Target")
	op, ok := strings.CutPrefix(target, "AmazonSQS.")
	if r.Method != http.MethodPost || !ok {
		writeError(w, errorf(400, "UnsupportedOperation", "AWS.SimpleQueueService.UnsupportedOperation", "want POST with X-Amz-Target: AmazonSQS.<Operation>, got %s %q", r.Method, target))
		return
	}
	var in map[string]json.RawMessage
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&in); err != nil {
		writeError(w, errorf(400, "InvalidParameterValue", "InvalidParameterValue", "malformed JSON body: %v", err))
		return
	}
	var out any
	var aerr *apiError
	switch op {
	case "CreateQueue":
		out, aerr = s.opCreateQueue(in)
	case "GetQueueUrl":
		out, aerr = s.opGetQueueURL(in)
	case "SendMessage":
		out, aerr = s.opSendMessage(in)
	case "SendMessageBatch":
		out, aerr = s.opSendMessageBatch(in)
	case "ReceiveMessage":
		out, aerr = s.opReceiveMessage(r, in)
	case "DeleteMessage":
		out, aerr = s.opDeleteMessage(in)
	case "DeleteMessageBatch":
		out, aerr = s.opDeleteMessageBatch(in)
	case "ChangeMessageVisibility":
		out, aerr = s.opChangeVisibility(in)
	case "ChangeMessageVisibilityBatch":
		out, aerr = s.opChangeVisibilityBatch(in)
	default:
		aerr = errorf(400, "UnsupportedOperation", "AWS.SimpleQueueService.UnsupportedOperation", "sqstest does not implement %s", op)
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-RequestId", newID())
	_ = json.NewEncoder(w).Encode(out)
}

func writeError(w http.ResponseWriter, e *apiError) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-RequestId", newID())
	w.Header().Set("X-Amzn-Query-Error", e.query+";Sender")
	w.WriteHeader(e.status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": "com.amazonaws.sqs#" + e.typ, "message": e.msg})
}

func str(in map[string]json.RawMessage, key string) string {
	var v string
	_ = json.Unmarshal(in[key], &v)
	return v
}

func num(in map[string]json.RawMessage, key string, def int) int {
	raw, ok := in[key]
	if !ok {
		return def
	}
	var v int
	if json.Unmarshal(raw, &v) != nil {
		return def
	}
	return v
}

// queueOf finds the queue a QueueUrl names (by its last path segment). Call with s.mu held.
func (s *Server) queueOf(in map[string]json.RawMessage) (*queue, *apiError) {
	u := str(in, "QueueUrl")
	name := u[strings.LastIndex(u, "/")+1:]
	q := s.queues[name]
	if q == nil {
		return nil, errorf(400, "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue", "the specified queue %q does not exist", u)
	}
	return q, nil
}

func (s *Server) opCreateQueue(in map[string]json.RawMessage) (any, *apiError) {
	name := str(in, "QueueName")
	if name == "" || len(name) > 80 {
		return nil, errorf(400, "InvalidParameterValue", "InvalidParameterValue", "QueueName must be 1 to 80 characters")
	}
	var attrs map[string]string
	_ = json.Unmarshal(in["Attributes"], &attrs)
	vis := 30 * time.Second
	if v, err := strconv.Atoi(attrs["VisibilityTimeout"]); err == nil {
		vis = time.Duration(v) * time.Second
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return map[string]string{"QueueUrl": s.createQueue(name, vis).url}, nil
}

func (s *Server) opGetQueueURL(in map[string]json.RawMessage) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[str(in, "QueueName")]
	if q == nil {
		return nil, errorf(400, "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue", "the specified queue %q does not exist", str(in, "QueueName"))
	}
	return map[string]string{"QueueUrl": q.url}, nil
}

// send stores one sent message, through the faults. Call with s.mu held.
func (s *Server) send(q *queue, body string, delay time.Duration) (id, sum string) {
	id, sum = newID(), md5Hex(body)
	s.sent.Add(1)
	copies := 1
	switch r := s.rnd.Float64(); {
	case r < s.faults.Drop:
		s.dropped.Add(1)
		return id, sum
	case r < s.faults.Drop+s.faults.Delay:
		s.delayed.Add(1)
		delay += s.faults.DelayBy
	case r < s.faults.Drop+s.faults.Delay+s.faults.Duplicate:
		s.duplicated.Add(1)
		copies = 2
	}
	for i := range copies {
		m := &message{id: id, body: body, md5: sum}
		if i > 0 {
			m.id = newID()
		}
		q.msgs[m.id] = m
		if delay > 0 {
			q.hide(m, time.Now().Add(delay))
		} else {
			q.ready = append(q.ready, m)
		}
	}
	q.wakeReceivers()
	return id, sum
}

func (s *Server) opSendMessage(in map[string]json.RawMessage) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, aerr := s.queueOf(in)
	if aerr != nil {
		return nil, aerr
	}
	body := str(in, "MessageBody")
	if body == "" {
		return nil, errorf(400, "MissingParameter", "MissingParameter", "MessageBody is required")
	}
	id, sum := s.send(q, body, time.Duration(num(in, "DelaySeconds", 0))*time.Second)
	return map[string]string{"MessageId": id, "MD5OfMessageBody": sum}, nil
}

type batchResult struct {
	Successful []map[string]string `json:"Successful"`
	Failed     []batchFailure      `json:"Failed"`
}

type batchFailure struct {
	ID          string `json:"Id"`
	Code        string `json:"Code"`
	Message     string `json:"Message"`
	SenderFault bool   `json:"SenderFault"`
}

// entries decodes a batch's Entries, checking SQS's rules (1 to 10, distinct ids).
func entries(in map[string]json.RawMessage) ([]map[string]json.RawMessage, *apiError) {
	var es []map[string]json.RawMessage
	_ = json.Unmarshal(in["Entries"], &es)
	switch {
	case len(es) == 0:
		return nil, errorf(400, "EmptyBatchRequest", "AWS.SimpleQueueService.EmptyBatchRequest", "the batch request doesn't contain any entries")
	case len(es) > 10:
		return nil, errorf(400, "TooManyEntriesInBatchRequest", "AWS.SimpleQueueService.TooManyEntriesInBatchRequest", "%d entries: at most 10", len(es))
	}
	seen := map[string]bool{}
	for _, e := range es {
		id := str(e, "Id")
		if seen[id] {
			return nil, errorf(400, "BatchEntryIdsNotDistinct", "AWS.SimpleQueueService.BatchEntryIdsNotDistinct", "entry id %q repeated", id)
		}
		seen[id] = true
	}
	return es, nil
}

func (s *Server) opSendMessageBatch(in map[string]json.RawMessage) (any, *apiError) {
	return s.batch(in, func(q *queue, e map[string]json.RawMessage) (map[string]string, *apiError) {
		body := str(e, "MessageBody")
		if body == "" {
			return nil, errorf(400, "MissingParameter", "MissingParameter", "MessageBody is required")
		}
		id, sum := s.send(q, body, time.Duration(num(e, "DelaySeconds", 0))*time.Second)
		return map[string]string{"MessageId": id, "MD5OfMessageBody": sum}, nil
	})
}

type receivedMessage struct {
	MessageID     string            `json:"MessageId"`
	ReceiptHandle string            `json:"ReceiptHandle"`
	MD5OfBody     string            `json:"MD5OfBody"`
	Body          string            `json:"Body"`
	Attributes    map[string]string `json:"Attributes"`
}

func (s *Server) opReceiveMessage(r *http.Request, in map[string]json.RawMessage) (any, *apiError) {
	maxN := num(in, "MaxNumberOfMessages", 1)
	wait := num(in, "WaitTimeSeconds", 0)
	if maxN < 1 || maxN > 10 {
		return nil, errorf(400, "InvalidParameterValue", "InvalidParameterValue", "MaxNumberOfMessages must be 1 to 10, got %d", maxN)
	}
	if wait < 0 || wait > 20 {
		return nil, errorf(400, "InvalidParameterValue", "InvalidParameterValue", "WaitTimeSeconds must be 0 to 20, got %d", wait)
	}
	deadline := time.Now().Add(time.Duration(wait) * time.Second)
	s.mu.Lock()
	q, aerr := s.queueOf(in)
	if aerr != nil {
		s.mu.Unlock()
		return nil, aerr
	}
	vis := q.visibility
	if v := num(in, "VisibilityTimeout", -1); v >= 0 {
		vis = time.Duration(v) * time.Second
	}
	for {
		now := time.Now()
		next := q.surface(now, &s.redelivered)
		if len(q.ready) > 0 || !now.Before(deadline) {
			break
		}
		// Long poll: wait for a send, a message becoming visible, the deadline or the client.
		wake := deadline
		if !next.IsZero() && next.Before(wake) {
			wake = next
		}
		changed := q.changed
		s.mu.Unlock()
		timer := time.NewTimer(time.Until(wake))
		select {
		case <-changed:
		case <-timer.C:
		case <-r.Context().Done():
		}
		timer.Stop()
		s.mu.Lock()
		if r.Context().Err() != nil {
			s.mu.Unlock()
			return map[string]any{"Messages": []receivedMessage{}}, nil
		}
	}
	defer s.mu.Unlock()
	out := []receivedMessage{}
	for len(out) < maxN && len(q.ready) > 0 {
		m := q.ready[0]
		q.ready = q.ready[1:]
		if q.msgs[m.id] != m || !m.visibleAt.IsZero() {
			continue // deleted, or hidden again, while ready
		}
		if m.receipt != "" {
			delete(q.byReceipt, m.receipt)
		}
		m.receipt = newID() + newID()
		m.receives++
		q.byReceipt[m.receipt] = m
		q.hide(m, time.Now().Add(vis))
		s.received.Add(1)
		out = append(out, receivedMessage{MessageID: m.id, ReceiptHandle: m.receipt, MD5OfBody: m.md5, Body: m.body,
			Attributes: map[string]string{"ApproximateReceiveCount": strconv.Itoa(m.receives)}})
	}
	return map[string]any{"Messages": out}, nil
}

// deleteMessage deletes by receipt handle: the latest handle deletes; an older one of a message
// received again since is accepted and does nothing (as SQS may). Call with s.mu held.
func (s *Server) deleteMessage(q *queue, receipt string) *apiError {
	m := q.byReceipt[receipt]
	if m == nil {
		if receipt == "" {
			return errorf(400, "ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid", "the receipt handle is empty")
		}
		return nil // already deleted, or superseded by a later receive
	}
	delete(q.byReceipt, receipt)
	delete(q.msgs, m.id)
	m.gen++
	s.deleted.Add(1)
	return nil
}

func (s *Server) opDeleteMessage(in map[string]json.RawMessage) (any, *apiError) {
	return s.single(in, func(q *queue) *apiError { return s.deleteMessage(q, str(in, "ReceiptHandle")) })
}

func (s *Server) opDeleteMessageBatch(in map[string]json.RawMessage) (any, *apiError) {
	return s.batch(in, func(q *queue, e map[string]json.RawMessage) (map[string]string, *apiError) {
		return nil, s.deleteMessage(q, str(e, "ReceiptHandle"))
	})
}

// single runs op on the request's queue with s.mu held; success is an empty object.
func (s *Server) single(in map[string]json.RawMessage, op func(*queue) *apiError) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, aerr := s.queueOf(in)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := op(q); aerr != nil {
		return nil, aerr
	}
	return map[string]string{}, nil
}

// batch runs op on each entry of the request with s.mu held, and reports each entry's outcome
// by its Id, as the batch actions do: a success with the fields op returns, a failure with its
// error.
func (s *Server) batch(in map[string]json.RawMessage, op func(*queue, map[string]json.RawMessage) (map[string]string, *apiError)) (any, *apiError) {
	es, aerr := entries(in)
	if aerr != nil {
		return nil, aerr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q, aerr := s.queueOf(in)
	if aerr != nil {
		return nil, aerr
	}
	res := batchResult{Successful: []map[string]string{}, Failed: []batchFailure{}}
	for _, e := range es {
		ok, aerr := op(q, e)
		if aerr != nil {
			res.Failed = append(res.Failed, batchFailure{ID: str(e, "Id"), Code: aerr.typ, Message: aerr.msg, SenderFault: true})
			continue
		}
		if ok == nil {
			ok = map[string]string{}
		}
		ok["Id"] = str(e, "Id")
		res.Successful = append(res.Successful, ok)
	}
	return res, nil
}

// changeVisibility hides an in-flight message for another timeout (0: visible now). Call with
// s.mu held.
func (s *Server) changeVisibility(q *queue, receipt string, secs int) *apiError {
	if secs < 0 || secs > 43200 {
		return errorf(400, "InvalidParameterValue", "InvalidParameterValue", "VisibilityTimeout must be 0 to 43200, got %d", secs)
	}
	m := q.byReceipt[receipt]
	if m == nil {
		return errorf(400, "ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid", "the receipt handle is not the latest of a message in the queue")
	}
	if m.visibleAt.IsZero() {
		return errorf(400, "MessageNotInflight", "AWS.SimpleQueueService.MessageNotInflight", "the message is not in flight")
	}
	if secs == 0 {
		m.gen++
		m.visibleAt = time.Time{}
		q.ready = append(q.ready, m)
		q.wakeReceivers()
		return nil
	}
	q.hide(m, time.Now().Add(time.Duration(secs)*time.Second))
	return nil
}

func (s *Server) opChangeVisibility(in map[string]json.RawMessage) (any, *apiError) {
	return s.single(in, func(q *queue) *apiError {
		return s.changeVisibility(q, str(in, "ReceiptHandle"), num(in, "VisibilityTimeout", -1))
	})
}

func (s *Server) opChangeVisibilityBatch(in map[string]json.RawMessage) (any, *apiError) {
	return s.batch(in, func(q *queue, e map[string]json.RawMessage) (map[string]string, *apiError) {
		return nil, s.changeVisibility(q, str(e, "ReceiptHandle"), num(e, "VisibilityTimeout", -1))
	})
}
