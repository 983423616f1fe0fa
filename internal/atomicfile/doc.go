// Package atomicfile writes files atomically: the content goes to a
// temporary file in the target's directory, which is synced and renamed
// over the target, so a reader sees the old file or the whole new one and
// a failed write leaves the target untouched.
//
// A save killed before its rename leaves its temporary file
// (".name.tmp…") behind; the next save of the same target removes every
// such file. Saves of one target are serialised by an advisory lock on
// ".name.lock" (on Unix), so a save never removes the temporary file of
// another save in progress; the lock file stays, empty.
package atomicfile
