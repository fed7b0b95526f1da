// Command goapp is the Go side of asynqpy's interop tests: it enqueues, works and inspects
// with the real github.com/hibiken/asynq, printing JSON that the Python tests compare against.
//
// Usage: goapp <enqueue|work|inspect> --redis host:port [--db N] [--password pw] [flags]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sync"

	"github.com/hibiken/asynq"
)

// commonFlags are taken by every subcommand.
type commonFlags struct {
	addr     string
	db       int
	password string
}

func (c *commonFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.addr, "redis", "127.0.0.1:6379", "Redis host:port")
	fs.IntVar(&c.db, "db", 0, "Redis database number")
	fs.StringVar(&c.password, "password", "", "Redis password")
}

func (c *commonFlags) connOpt() asynq.RedisClientOpt {
	return asynq.RedisClientOpt{Addr: c.addr, DB: c.db, Password: c.password}
}

var (
	outMu  sync.Mutex
	outEnc = json.NewEncoder(os.Stdout)
)

// emit writes v as one JSON line on stdout; safe to call from handler goroutines.
func emit(v any) {
	outMu.Lock()
	defer outMu.Unlock()
	if err := outEnc.Encode(v); err != nil {
		fail("encode output: %v", err)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "goapp: "+format+"\n", args...)
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 {
		fail("usage: goapp <enqueue|work|inspect> [flags]")
	}
	cmd, args := os.Args[1], os.Args[2:]
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	var common commonFlags
	common.register(fs)
	switch cmd {
	case "enqueue":
		fs.Parse(args)
		runEnqueue(common.connOpt())
	case "work":
		wf := registerWorkFlags(fs)
		fs.Parse(args)
		runWork(common.connOpt(), wf)
	case "inspect":
		lookups := registerInspectFlags(fs)
		fs.Parse(args)
		runInspect(common.connOpt(), *lookups)
	case "typed":
		typedCommand(fs, &common, args)
	default:
		fail("unknown subcommand %q", cmd)
	}
}
