// Command etcd-compact compacts an etcd's history up to its newest revision, so that every
// watch or list from an older resourceVersion is answered 410 Gone: what a busy cluster's
// apiserver compaction does every five minutes, on demand for the tests.
//
// Usage: etcd-compact http://127.0.0.1:PORT
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: etcd-compact ENDPOINT")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{os.Args[1]}, DialTimeout: 10 * time.Second})
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd-compact: cannot reach %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	defer client.Close()
	status, err := client.Status(ctx, os.Args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd-compact: cannot read the revision of %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	revision := status.Header.Revision
	if _, err := client.Compact(ctx, revision, clientv3.WithCompactPhysical()); err != nil {
		fmt.Fprintf(os.Stderr, "etcd-compact: cannot compact %s at %d: %v\n", os.Args[1], revision, err)
		os.Exit(1)
	}
	fmt.Println(revision)
}
