package embedtest_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/leasegate/leasegate/embedtest"
)

// A three-member cluster driven by a program: the leader is killed, the
// others elect a new one and keep serving, the killed member comes back
// with its data and catches up.
func Example() {
	dir, err := os.MkdirTemp("", "embedtest-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	cl, err := embedtest.Start(dir, embedtest.WithSize(3))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli, err := cl.NewClient()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cli.Close()

	lead, err := cl.Leader(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := cl.Member(lead).Kill(); err != nil { // no leadership transfer
		fmt.Println(err)
		return
	}
	next, err := cl.Leader(ctx) // the two others elect
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := cli.Put(ctx, "k", "written without the old leader"); err != nil {
		fmt.Println(err)
		return
	}
	if err := cl.Member(lead).Start(); err != nil {
		fmt.Println(err)
		return
	}
	resp, err := cli.Get(ctx, "k")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("leader changed:", next != lead)
	fmt.Println(string(resp.Kvs[0].Value))
	// Output:
	// leader changed: true
	// written without the old leader
}
