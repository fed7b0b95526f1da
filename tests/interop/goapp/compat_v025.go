//go:build asynq_v025

package main

import (
	"time"

	"github.com/hibiken/asynq"
)

// Config.TaskCheckInterval (how long an idle worker waits before looking again) came with asynq v0.25.0.
const hasTaskCheckInterval = true

func setTaskCheckInterval(c *asynq.Config, d time.Duration) { c.TaskCheckInterval = d }
