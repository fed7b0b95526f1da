package main

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"time"

	"github.com/hibiken/asynq"
)

// taskSpec is one task to enqueue, read from stdin. Absent fields leave asynq's defaults;
// an absent payload_b64 gives Go a nil payload (which changes the unique key, see the spec §8.5).
type taskSpec struct {
	Type          string            `json:"type"`
	PayloadB64    *string           `json:"payload_b64"`
	Queue         *string           `json:"queue"`
	MaxRetry      *int              `json:"max_retry"`
	TimeoutS      *float64          `json:"timeout_s"`
	DeadlineUnix  *float64          `json:"deadline_unix"`
	ProcessInS    *float64          `json:"process_in_s"`
	ProcessAtUnix *float64          `json:"process_at_unix"`
	UniqueS       *float64          `json:"unique_s"`
	TaskID        *string           `json:"task_id"`
	RetentionS    *float64          `json:"retention_s"`
	Group         *string           `json:"group"`
	Headers       map[string]string `json:"headers"`
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func unixTime(s float64) time.Time { return time.Unix(0, int64(s*1e9)) }

// options maps the spec onto asynq options, in a fixed order.
func (s *taskSpec) options() []asynq.Option {
	var opts []asynq.Option
	if s.Queue != nil {
		opts = append(opts, asynq.Queue(*s.Queue))
	}
	if s.MaxRetry != nil {
		opts = append(opts, asynq.MaxRetry(*s.MaxRetry))
	}
	if s.TimeoutS != nil {
		opts = append(opts, asynq.Timeout(seconds(*s.TimeoutS)))
	}
	if s.DeadlineUnix != nil {
		opts = append(opts, asynq.Deadline(unixTime(*s.DeadlineUnix)))
	}
	if s.ProcessInS != nil {
		opts = append(opts, asynq.ProcessIn(seconds(*s.ProcessInS)))
	}
	if s.ProcessAtUnix != nil {
		opts = append(opts, asynq.ProcessAt(unixTime(*s.ProcessAtUnix)))
	}
	if s.UniqueS != nil {
		opts = append(opts, asynq.Unique(seconds(*s.UniqueS)))
	}
	if s.TaskID != nil {
		opts = append(opts, asynq.TaskID(*s.TaskID))
	}
	if s.RetentionS != nil {
		opts = append(opts, asynq.Retention(seconds(*s.RetentionS)))
	}
	if s.Group != nil {
		opts = append(opts, asynq.Group(*s.Group))
	}
	return opts
}

func (s *taskSpec) task() (*asynq.Task, error) {
	var payload []byte
	if s.PayloadB64 != nil {
		b, err := base64.StdEncoding.DecodeString(*s.PayloadB64)
		if err != nil {
			return nil, err
		}
		payload = b
	}
	return newTask(s.Type, payload, s.Headers)
}

func errorKind(err error) string {
	switch {
	case errors.Is(err, asynq.ErrDuplicateTask):
		return "duplicate_task"
	case errors.Is(err, asynq.ErrTaskIDConflict):
		return "task_id_conflict"
	default:
		return "other"
	}
}

// enqueueCommand reads a JSON list of taskSpec from stdin and prints one line per task:
// the TaskInfo with "event":"enqueued", or "event":"enqueue_error" with error and kind.
func enqueueCommand(fs *flag.FlagSet, common *commonFlags, args []string) {
	fs.Parse(args)
	runEnqueue(common.connOpt())
}

// runEnqueue is enqueueCommand on any connection (one server, or a cluster: cluster.go).
func runEnqueue(opt asynq.RedisConnOpt) {
	var specs []taskSpec
	if err := json.NewDecoder(os.Stdin).Decode(&specs); err != nil {
		fail("read specs: %v", err)
	}
	client := asynq.NewClient(opt)
	defer client.Close()
	for i := range specs {
		info, err := enqueueOne(client, &specs[i])
		if err != nil {
			emit(map[string]any{"event": "enqueue_error", "index": i, "error": err.Error(), "kind": errorKind(err)})
			continue
		}
		out := taskJSON(info)
		out["event"], out["index"] = "enqueued", i
		emit(out)
	}
}

func enqueueOne(client *asynq.Client, s *taskSpec) (*asynq.TaskInfo, error) {
	t, err := s.task()
	if err != nil {
		return nil, err
	}
	return client.Enqueue(t, s.options()...)
}
