package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
)

// typedLine and typedInvoice are the Go side of a typed asynqpy task (@mux.task over a Python function):
// json.Marshal of typedInvoice is a payload the Python function takes by name, and json.Unmarshal reads
// the payload Python enqueues for it.
type typedLine struct {
	SKU       string `json:"sku"`
	Qty       int    `json:"qty"`
	UnitPrice string `json:"unit_price"`
}

type typedInvoice struct {
	InvoiceID  string      `json:"invoice_id"`
	Customer   string      `json:"customer"`
	Amount     string      `json:"amount"`
	Due        time.Time   `json:"due"`
	Tier       string      `json:"tier"`
	Lines      []typedLine `json:"lines"`
	Note       *string     `json:"note"`
	Attachment []byte      `json:"attachment"`
}

// typedCommand: `typed --mode enqueue` enqueues json.Marshal of a sample invoice and prints its id and
// payload; `typed --mode work` decodes tasks of --type with json.Unmarshal (unknown fields refused) and
// prints each decoded invoice, until --expect tasks were seen or --duration passed.
func typedCommand(fs *flag.FlagSet, common *commonFlags, args []string) {
	mode := fs.String("mode", "", "enqueue or work")
	taskType := fs.String("type", "invoice:send", "task type")
	queue := fs.String("queue", "default", "queue")
	expect := fs.Int("expect", 1, "work: stop after this many tasks")
	duration := fs.Duration("duration", 20*time.Second, "work: stop after this long")
	fs.Parse(args)
	switch *mode {
	case "enqueue":
		typedEnqueue(common.connOpt(), *taskType, *queue)
	case "work":
		typedWork(common.connOpt(), *taskType, *queue, *expect, *duration)
	default:
		fail("typed: --mode must be enqueue or work, not %q", *mode)
	}
}

func sampleInvoice() typedInvoice {
	note := "rush <fragile> & dry"
	return typedInvoice{
		InvoiceID:  "2f1d3c4b-5a69-4788-9aab-bccddeeff001",
		Customer:   "Ada Lovelace",
		Amount:     "1234.50",
		Due:        time.Date(2026, 3, 1, 9, 30, 0, 120000000, time.FixedZone("CET", 3600)),
		Tier:       "pro",
		Lines:      []typedLine{{SKU: "A-1", Qty: 2, UnitPrice: "9.95"}, {SKU: "B-7", Qty: 1, UnitPrice: "0.10"}},
		Note:       &note,
		Attachment: []byte{0, 255, 1},
	}
}

func typedEnqueue(opt asynq.RedisClientOpt, taskType, queue string) {
	payload, err := json.Marshal(sampleInvoice())
	if err != nil {
		fail("typed: marshal: %v", err)
	}
	client := asynq.NewClient(opt)
	defer client.Close()
	info, err := client.Enqueue(asynq.NewTask(taskType, payload), asynq.Queue(queue), asynq.MaxRetry(3))
	if err != nil {
		fail("typed: enqueue: %v", err)
	}
	emit(map[string]any{"event": "enqueued", "id": info.ID, "queue": info.Queue, "payload": string(payload)})
}

func typedWork(opt asynq.RedisClientOpt, taskType, queue string, expect int, duration time.Duration) {
	done := make(chan struct{}, expect+1)
	mux := asynq.NewServeMux()
	mux.HandleFunc(taskType, func(ctx context.Context, t *asynq.Task) error {
		defer func() { done <- struct{}{} }()
		var inv typedInvoice
		dec := json.NewDecoder(bytes.NewReader(t.Payload()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&inv); err != nil {
			emit(map[string]any{"event": "decode_error", "type": t.Type(), "error": err.Error()})
			return fmt.Errorf("decode: %v: %w", err, asynq.SkipRetry)
		}
		emit(map[string]any{"event": "decoded", "type": t.Type(), "invoice": inv,
			"due_unix_nano": inv.Due.UnixNano(), "due_offset_s": offsetSeconds(inv.Due)})
		return nil
	})
	srv := asynq.NewServer(opt, asynq.Config{Concurrency: 2, Queues: map[string]int{queue: 1}, LogLevel: asynq.WarnLevel})
	if err := srv.Start(mux); err != nil {
		fail("typed: start: %v", err)
	}
	deadline := time.After(duration)
	for seen := 0; seen < expect; seen++ {
		select {
		case <-done:
		case <-deadline:
			seen = expect
		}
	}
	srv.Shutdown()
}

func offsetSeconds(t time.Time) int {
	_, off := t.Zone()
	return off
}
