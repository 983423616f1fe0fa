package pacs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/radgen/radgen/memtrans/dicomweb"
	"github.com/radgen/radgen/memtrans/hl7"
)

// journalled returns the pending HL7 message of a study, or nil.
func (w *Worker) journalled(uid string) *pending {
	if w.journal == nil {
		return nil
	}
	return w.journal.get(uid)
}

// pendingCount returns the number of HL7 messages not yet acknowledged.
func (w *Worker) pendingCount() int {
	if w.journal == nil {
		return 0
	}
	return w.journal.len()
}

func (w *Worker) setPending() {
	n := w.pendingCount()
	w.count(func(s *Stats) { s.HL7Pending = n })
}

// flushHL7 sends the journalled HL7 messages that are due: those of SRs
// stored in this run, and those left by an earlier one (a crash, an
// unreachable receiver), whose SR it first looks for in the PACS: an
// entry whose SR is not there is dropped, the study being reported on
// afresh. It returns an error when the PACS is unreachable, or the worker
// cannot go on.
func (w *Worker) flushHL7(ctx context.Context, res *pollResult) error {
	if w.journal == nil {
		return nil
	}
	for _, p := range w.journal.list() {
		now := time.Now()
		if now.Before(w.ris.next) {
			res.retryAt(w.ris.next)
			return nil
		}
		if now.Before(p.next) {
			res.retryAt(p.next)
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !p.stored {
			there, err := w.srStored(ctx, p.Study, p.Series)
			if err != nil && (errors.Is(err, dicomweb.ErrUnavailable) || ctx.Err() != nil) {
				return fmt.Errorf("pacs: looking for the SR of a pending HL7 message: %w", err)
			}
			if !there {
				if err := w.journal.remove(p.Study); err != nil {
					return err
				}
				w.setPending()
				attrs := []slog.Attr{slog.String("study", p.Study), slog.String("control_id", p.ControlID)}
				if err != nil {
					attrs = append(attrs, slog.String("error", clean(err.Error(), 1024)))
				}
				w.log.LogAttrs(ctx, slog.LevelWarn, "pacs: a pending HL7 message is dropped: its SR is not in the PACS, and the study will be reported on afresh", attrs...)
				continue
			}
			p.stored = true
		}
		if err := w.deliver(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// deliver sends the HL7 message of a stored SR, unless the receiver or
// the message is held back. Acknowledged, it leaves the journal; an
// unreachable receiver holds every message back (Backoff); a rejection
// (AR, CR) holds this one back (StudyRetry) and dead-letters the study
// past StudyRetry.Attempts or StudyMaxAge; a refusal (AE, CE, an answer
// that is not its acknowledgement) dead-letters it at once. The SR stays
// stored in every case. Only the worker's own failures are returned.
func (w *Worker) deliver(ctx context.Context, p *pending) error {
	now := time.Now()
	if now.Before(w.ris.next) || now.Before(p.next) {
		return nil
	}
	ack, err := w.cfg.MLLP.Send(ctx, []byte(p.Message))
	switch {
	case err == nil:
		if err := w.journal.remove(p.Study); err != nil {
			return err
		}
		w.setPending()
		w.ris = outage{}
		w.count(func(s *Stats) { s.HL7Sent++ })
		w.log.LogAttrs(ctx, slog.LevelInfo, "pacs: HL7 message acknowledged", slog.String("study", p.Study), slog.String("control_id", p.ControlID),
			slog.String("ack", ack.Code))
		return nil
	case ctx.Err() != nil:
		return nil // it stays in the journal
	case errors.Is(err, hl7.ErrUnavailable):
		w.ris.failures++
		wait := w.cfg.Backoff.Delay(w.ris.failures)
		w.ris.next = now.Add(wait)
		w.count(func(s *Stats) { s.Outages++ })
		w.log.LogAttrs(ctx, slog.LevelWarn, "pacs: HL7 receiver unreachable; the message stays in the journal", slog.String("study", p.Study),
			slog.Duration("wait", wait), slog.Int("pending", w.journal.len()), slog.String("error", clean(err.Error(), 1024)))
		return nil
	case errors.Is(err, hl7.ErrRejected):
		p.failures++
		if p.failures == 1 {
			p.firstFail = now
		}
		switch {
		case p.failures >= w.cfg.StudyRetry.Attempts:
			return w.deadLetter(ctx, p.Study, fmt.Errorf("the SR is stored; the HL7 receiver rejected its message %d times: %w", p.failures, err))
		case now.Sub(p.firstFail) >= w.cfg.StudyMaxAge:
			return w.deadLetter(ctx, p.Study, fmt.Errorf("the SR is stored; the HL7 receiver still rejects its message %s after the first time: %w",
				now.Sub(p.firstFail).Round(time.Second), err))
		}
		wait := w.cfg.StudyRetry.Delay(p.failures)
		p.next = now.Add(wait)
		w.count(func(s *Stats) { s.Retries++ })
		w.log.LogAttrs(ctx, slog.LevelWarn, "pacs: HL7 message rejected, not for its content; sending it again later", slog.String("study", p.Study),
			slog.Int("failures", p.failures), slog.Duration("wait", wait), slog.String("error", clean(err.Error(), 1024)))
		return nil
	}
	return w.deadLetter(ctx, p.Study, fmt.Errorf("the SR is stored; the HL7 receiver refused its message: %w", err))
}
