//go:build !asynq025

package main

import "github.com/hibiken/asynq"

// Task headers arrived in asynq v0.26.0 (build with -tags asynq025 for v0.25.x).
const hasHeaders = true

func newTaskWithHeaders(typ string, payload []byte, h map[string]string) *asynq.Task {
	return asynq.NewTaskWithHeaders(typ, payload, h)
}

func taskHeaders(t *asynq.TaskInfo) map[string]string { return t.Headers }
