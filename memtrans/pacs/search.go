package pacs

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"

	"github.com/radgen/radgen/memtrans/dicomweb"
)

// found is a study a search listed.
type found struct {
	uid   string
	count int // Number of Study Related Instances (0 when not given)
}

// searchResult is what one search of the PACS found.
type searchResult struct {
	studies  []found // in the order listed, each once
	complete bool    // the search reached an empty page
}

// maxInvalidKept bounds the invalid StudyInstanceUIDs remembered (to log
// each once).
const maxInvalidKept = 10000

// search pages through the PACS's studies: pages of PageSize asked at
// the offset of the studies listed so far, until an empty page, for at
// most MaxPages pages. A page shorter than asked (a PACS capping its
// pages) does not end it. A page that lists no study not listed before
// (a PACS ignoring offset) ends it, logged, as an incomplete search; so
// does the page cap. An error on the first page is the search's error; on
// a later page the studies listed so far come with it, except that a
// final 4xx answer right after a short page is taken for the end.
func (w *Worker) search(ctx context.Context) (searchResult, error) {
	var res searchResult
	index := map[string]int{}
	offset, short := 0, false
	for page := 0; ; page++ {
		if page == w.cfg.MaxPages {
			w.count(func(s *Stats) { s.SearchesCut++ })
			w.log.LogAttrs(ctx, slog.LevelWarn, "pacs: search cut at its page cap; later studies are not seen (narrow it with Since)",
				slog.Int("pages", page), slog.Int("studies", len(res.studies)))
			return res, nil
		}
		ds, err := w.cfg.PACS.SearchStudies(ctx, dicomweb.Query{Modalities: w.cfg.Modalities, From: w.cfg.Since, Limit: w.cfg.PageSize, Offset: offset})
		if ctx.Err() != nil {
			return res, ctx.Err() // stopped: no anomaly of the PACS
		}
		if err != nil {
			if se, ok := errors.AsType[*dicomweb.StatusError](err); page > 0 && short && ok && !se.Temporary() {
				w.log.LogAttrs(ctx, slog.LevelInfo, "pacs: the PACS refuses the page past a short one; taken as the search's end",
					slog.Int("offset", offset), slog.String("error", err.Error()))
				res.complete = true
				return res, nil
			}
			if page > 0 {
				w.count(func(s *Stats) { s.SearchesCut++ })
			}
			return res, fmt.Errorf("pacs: searching for studies (offset %d): %w", offset, err)
		}
		if len(ds) == 0 {
			res.complete = true
			return res, nil
		}
		if short {
			w.count(func(s *Stats) { s.ShortPages++ })
			w.once(ctx, "short pages", slog.LevelWarn, "pacs: the PACS answers fewer studies a page than asked, though more follow; paging on",
				slog.Int("asked", w.cfg.PageSize), slog.Int("offset", offset))
		}
		fresh := 0
		for _, d := range ds {
			uid := d.String(dicomweb.TagStudyInstanceUID)
			key := uid
			if !validUID(uid) {
				key = invalidKey(uid)
			}
			if i, ok := index[key]; ok {
				if i >= 0 {
					n, _ := d.Int(dicomweb.TagNumberOfStudyInstances)
					res.studies[i].count = max(res.studies[i].count, n)
					if !w.done[uid] && !w.isDead(uid) {
						w.duplicate(ctx, uid)
					}
				}
				continue
			}
			fresh++
			if key != uid {
				index[key] = -1
				w.invalid(ctx, uid, key)
				continue
			}
			n, _ := d.Int(dicomweb.TagNumberOfStudyInstances)
			index[uid] = len(res.studies)
			res.studies = append(res.studies, found{uid: uid, count: n})
		}
		if fresh == 0 {
			w.count(func(s *Stats) { s.SearchesCut++ })
			w.log.LogAttrs(ctx, slog.LevelError, "pacs: a page of the search lists no study not listed before (does the PACS ignore offset?); the search stops there",
				slog.Int("offset", offset), slog.Int("page_studies", len(ds)), slog.Int("studies", len(res.studies)))
			return res, nil
		}
		short = len(ds) < w.cfg.PageSize
		offset += len(ds)
	}
}

// invalidKey names an invalid StudyInstanceUID by its start, length and
// hash, so that a huge one is not kept.
func invalidKey(uid string) string {
	h := fnv.New64a()
	h.Write([]byte(uid))
	return fmt.Sprintf("%s…(%d bytes, %016x)", clean(uid, 32), len(uid), h.Sum64())
}

// invalid logs, once per worker, a study listed with a StudyInstanceUID
// that is not a UID, and counts it; the study is left alone.
func (w *Worker) invalid(ctx context.Context, uid, key string) {
	if _, ok := w.invalids[key]; ok {
		return
	}
	if len(w.invalids) >= maxInvalidKept {
		clear(w.invalids)
	}
	w.invalids[key] = struct{}{}
	w.count(func(s *Stats) { s.InvalidUIDs++ })
	w.log.LogAttrs(ctx, slog.LevelError, "pacs: a study listed without a valid StudyInstanceUID is left alone",
		slog.String("study", clean(uid, 80)), slog.Int("length", len(uid)))
}

// duplicate logs, once per study, a StudyInstanceUID listed twice by one
// search, and counts it.
func (w *Worker) duplicate(ctx context.Context, uid string) {
	st := w.stateOf(uid)
	if st.duplicate {
		return
	}
	st.duplicate = true
	w.count(func(s *Stats) { s.Duplicates++ })
	w.log.LogAttrs(ctx, slog.LevelWarn, "pacs: the search lists a study more than once; it is reported on once, with the largest instance count",
		slog.String("study", uid))
}

// once logs a message the first time its key comes in the worker's life.
func (w *Worker) once(ctx context.Context, key string, level slog.Level, msg string, attrs ...slog.Attr) {
	if w.logged[key] {
		return
	}
	w.logged[key] = true
	w.log.LogAttrs(ctx, level, msg, attrs...)
}
