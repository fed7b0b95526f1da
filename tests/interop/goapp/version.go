package main

import (
	"flag"
	"runtime/debug"
)

// versionCommand prints the asynq release this binary was built against and which of the features that
// differ between releases it has: {"asynq": "v0.25.1", "go": "go1.24.1", "headers": false, ...}.
func versionCommand(fs *flag.FlagSet, _ *commonFlags, args []string) {
	fs.Parse(args)
	version, goVersion := "unknown", "unknown"
	if info, ok := debug.ReadBuildInfo(); ok {
		goVersion = info.GoVersion
		for _, dep := range info.Deps {
			if dep.Path == "github.com/hibiken/asynq" {
				version = dep.Version
				if dep.Replace != nil {
					version = dep.Replace.Version
				}
			}
		}
	}
	emit(map[string]any{
		"asynq": version, "go": goVersion, "headers": hasHeaders, "task_check_interval": hasTaskCheckInterval,
	})
}
