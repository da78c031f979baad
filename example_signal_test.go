package taskorch_test

import (
	"context"
	"fmt"
	"log"

	"github.com/taskorch/taskorch"
)

// Signal records an event from the outside world once; a process waiting for it
// (queues.wait_for_signal) is made due at once. A repeat is harmless: it returns false.
func ExampleClient_Signal() {
	ctx := context.Background()
	client, err := taskorch.NewClient(exampleDB(), nil)
	if err != nil {
		log.Fatal(err)
	}
	type confirmed struct {
		IP string `json:"ip"`
	}
	first, err := client.Signal(ctx, "email.confirmed", "user-42", confirmed{IP: "192.0.2.1"})
	if err != nil {
		log.Fatal(err)
	}
	again, err := client.Signal(ctx, "email.confirmed", "user-42", confirmed{IP: "192.0.2.7"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(first, again)

	_, err = client.Signal(ctx, "email.confirmed", "", nil)
	fmt.Println(err)
	// Output:
	// true false
	// taskorch: signal "email.confirmed": key must not be empty
}
