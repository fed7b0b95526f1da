// Command goapp is the Go side of asynqpy's interop tests: it enqueues, works and inspects
// with the real github.com/hibiken/asynq, printing JSON that the Python tests compare against.
//
// Usage:
//
//	goapp <enqueue|work|inspect|act|version> --redis host:port [--db N] [--password pw] [flags]
//	goapp cluster <enqueue|work|inspect> --addrs h1:p1,h2:p2 [--password pw] [flags]
//
// It builds against every asynq release from v0.23.0 on (tests/interop/goasynq.py): features that a release
// lacks are behind build tags (compat_*.go), and `goapp version` says which release and features it has.
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

// commands maps each subcommand to its function, which lives in a file of its own: adding a subcommand is
// that file and one line here. A command registers its flags on fs, parses args and reads common after that.
var commands = map[string]func(fs *flag.FlagSet, common *commonFlags, args []string){
	"enqueue":  enqueueCommand,
	"work":     workCommand,
	"inspect":  inspectCommand,
	"version":  versionCommand,
	"schedule": runSchedule,
	"cluster":  clusterCommand,
	"typed":    typedCommand,
	"act":      actCommand,
}

func main() {
	if len(os.Args) < 2 {
		fail("usage: goapp <subcommand> [flags] (subcommands: enqueue, work, inspect, version, cluster, ...)")
	}
	cmd, args := os.Args[1], os.Args[2:]
	run, ok := commands[cmd]
	if !ok {
		fail("unknown subcommand %q", cmd)
	}
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	var common commonFlags
	common.register(fs)
	run(fs, &common, args)
}
