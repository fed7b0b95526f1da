package main

import (
	"flag"
	"strings"

	"github.com/hibiken/asynq"
)

// clusterCommand runs the enqueue, work or inspect subcommand against a Redis Cluster, through asynq's
// RedisClusterClientOpt:
//
//	goapp cluster <enqueue|work|inspect> --addrs h1:p1,h2:p2 [--password pw] [that subcommand's flags]
//
// It takes the flags of its own: common (--redis, --db) does not apply to a cluster. asynq's
// RedisClusterClientOpt exists in every release of the matrix, so this file has no build tag.
func clusterCommand(_ *flag.FlagSet, _ *commonFlags, args []string) {
	if len(args) < 1 {
		fail("usage: goapp cluster <enqueue|work|inspect> --addrs h1:p1,h2:p2 [flags]")
	}
	cmd, rest := args[0], args[1:]
	fs := flag.NewFlagSet("cluster "+cmd, flag.ExitOnError)
	addrs := fs.String("addrs", "127.0.0.1:7000", "cluster seed nodes, host:port,...")
	password := fs.String("password", "", "Redis password")
	opt := func() asynq.RedisClusterClientOpt {
		return asynq.RedisClusterClientOpt{Addrs: strings.Split(*addrs, ","), Password: *password}
	}
	switch cmd {
	case "enqueue":
		fs.Parse(rest)
		runEnqueue(opt())
	case "work":
		wf := registerWorkFlags(fs)
		fs.Parse(rest)
		runWork(opt(), wf)
	case "inspect":
		lookups := registerInspectFlags(fs)
		fs.Parse(rest)
		runInspect(opt(), *lookups)
	default:
		fail("unknown cluster subcommand %q", cmd)
	}
}
