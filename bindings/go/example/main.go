// Command orders is the example service of docs/client.md: a Go program that takes IDs from
// the host's snowflaked and depends on nothing but the Go standard library and the
// snowflake package, so it builds with CGO_ENABLED=0 into a static binary that runs in an
// image with nothing else in it (the runtime directory mounted in).
//
//	orders [-runtime-dir DIR] [-n N]
//
// Prints N IDs, one per line, each with its decoded time; exit status 1 with the library's
// message (what happened and what to do) when the daemon cannot serve.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"snowflaked.example/snowflake"
)

func main() {
	runtimeDir := flag.String("runtime-dir", "", "the daemon's runtime directory (default: $SNOWFLAKE_RUNTIME_DIR, else /run/snowflaked)")
	n := flag.Int("n", 3, "how many IDs to print")
	flag.Parse()

	client, err := snowflake.Open("orders", snowflake.WithRuntimeDir(*runtimeDir),
		snowflake.WithTimeout(100*time.Millisecond))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer client.Close()
	for i := 0; i < *n; i++ {
		id, err := client.Next()
		if errors.Is(err, snowflake.ErrUnavailable) {
			// A service would fail over here (WithRemotes) or answer 503.
			fmt.Fprintln(os.Stderr, "no local daemon serving:", err)
			os.Exit(1)
		} else if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fields, _ := client.Decode(id)
		fmt.Printf("%d %s\n", id, fields.Time.Format(time.RFC3339Nano))
	}
}
