//go:build !asynq_v025

package main

import (
	"time"

	"github.com/hibiken/asynq"
)

// Before asynq v0.25.0 an idle worker waits its built-in interval (one second) before looking again.
const hasTaskCheckInterval = false

func setTaskCheckInterval(*asynq.Config, time.Duration) {}
