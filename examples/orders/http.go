package orders

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskorch/taskorch"
)

// HTTPHandler serves the service's API:
//
//	POST /orders          {"customer": "ada", "amount_cents": 1200} records an order and enqueues
//	                      its charge in one transaction; with ?wait=5s it then waits up to that
//	                      long for the charge (Client.Wait) and answers with its outcome
//	GET  /orders/{id}     the order
func (s *Service) HTTPHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders", s.postOrder)
	mux.HandleFunc("GET /orders/{id}", s.getOrder)
	return mux
}

// OrderCreated is POST /orders' answer.
type OrderCreated struct {
	OrderID int64 `json:"order_id"`
	TaskID  int64 `json:"task_id"`
	// Charge is the charge's status once waited for (?wait), and its receipt when it completed.
	Charge  *taskorch.Status `json:"charge,omitempty"`
	Receipt string           `json:"receipt,omitempty"`
}

func (s *Service) postOrder(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Customer    string `json:"customer"`
		AmountCents int64  `json:"amount_cents"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, "bad JSON: "+err.Error(), http.StatusBadRequest)
		return
	}
	var wait time.Duration
	if v := r.URL.Query().Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > time.Minute {
			http.Error(w, "wait must be a duration up to 1m, e.g. 5s", http.StatusBadRequest)
			return
		}
		wait = d
	}
	ctx := r.Context()
	var out OrderCreated
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) (err error) {
		out.OrderID, out.TaskID, err = s.CreateOrder(ctx, tx, in.Customer, in.AmountCents)
		return err
	})
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// Committed: a worker may run the charge now. Wait only after the commit.
	if wait > 0 {
		wctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		task, err := s.Client.Wait(wctx, out.TaskID)
		switch {
		case err == nil:
			out.Charge = &task.Status
			var c Charged
			if task.Result != nil && json.Unmarshal(task.Result, &c) == nil {
				out.Receipt = c.Receipt
			}
		case errors.Is(err, wctx.Err()):
			// Not finished yet: the client asks for the order later.
		default:
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	writeJSON(w, http.StatusCreated, out)
}

func (s *Service) getOrder(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		http.Error(w, "the order id must be a number", http.StatusBadRequest)
		return
	}
	o, err := s.Get(r.Context(), id)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		http.Error(w, "no such order", http.StatusNotFound)
	case err != nil:
		http.Error(w, err.Error(), http.StatusInternalServerError)
	default:
		writeJSON(w, http.StatusOK, o)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
