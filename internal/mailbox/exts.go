package mailbox

import "github.com/continuumdb/continuum/record"

// AppendExts appends to ext the data of the extensions of an atom's
// record that carry what it sent and consumed (record.ExtTagSent, then
// record.ExtTagConsumed), and to exts the extensions, whose Data slices
// ext; it returns both. With neither, it returns them unchanged: the
// atom's body is then version 1, as before messages existed.
func AppendExts(ext []byte, exts []record.AtomExt, sent []record.SentMessage, consumed []record.MessageID) ([]byte, []record.AtomExt) {
	if len(sent) == 0 && len(consumed) == 0 {
		return ext, exts
	}
	first := len(exts)
	start := len(ext)
	if len(sent) > 0 {
		ext = record.AppendSent(ext, sent)
		exts = append(exts, record.AtomExt{Tag: record.ExtTagSent})
	}
	split := len(ext)
	if len(consumed) > 0 {
		ext = record.AppendConsumed(ext, consumed)
		exts = append(exts, record.AtomExt{Tag: record.ExtTagConsumed})
	}
	// The data slices are taken once ext no longer grows.
	i := first
	if len(sent) > 0 {
		exts[i].Data = ext[start:split]
		i++
	}
	if len(consumed) > 0 {
		exts[i].Data = ext[split:]
	}
	return ext, exts
}
