package wireframe

// The format of continuum-frames/1. These constants are frozen: a change
// is a new protocol (continuum-frames/2, a new preface).
//
//	connection: preface (20 bytes) in each direction, then frames
//	preface:    00 "continuum-frames/1\n"
//
//	frame (both directions):
//	+----------+----------+----------+--------------+----------------+
//	| n  u32BE | id u32BE | hlen u32BE | head (hlen) | body           |
//	+----------+----------+----------+--------------+----------------+
//	n = 8 + hlen + len(body): the bytes after the n field
//
//	request head: "METHOD TARGET\n" then "Name: value\n" lines
//	answer head:  "STATUS\n" (decimal) then "Name: value\n" lines

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"strconv"
	"unicode/utf8"
)

// Preface opens a connection in each direction: a zero byte (no HTTP
// request starts with it), then the protocol's name.
const Preface = "\x00continuum-frames/1\n"

// FixedLen is the length of a frame's fixed fields (n, id, hlen).
const FixedLen = 12

// MaxHead is the largest request head a server reads (431
// header_too_large beyond), the same bound as HTTP's header.
const MaxHead = 64 << 10

// MaxInFlight is how many requests a server reads ahead on one
// connection before it waits for answers to go out.
const MaxInFlight = 128

// ErrHead is the class of errors of a head that does not parse.
var ErrHead = errors.New("wireframe: malformed head")

// AppendFrame appends the frame of id with head and body to dst.
func AppendFrame(dst []byte, id uint32, head, body []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(8+len(head)+len(body)))
	dst = binary.BigEndian.AppendUint32(dst, id)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(head)))
	dst = append(dst, head...)
	return append(dst, body...)
}

// Fixed decodes a frame's fixed fields.
func Fixed(b []byte) (n, id, hlen uint32) {
	return binary.BigEndian.Uint32(b), binary.BigEndian.Uint32(b[4:]), binary.BigEndian.Uint32(b[8:])
}

// skipHeader reports whether a header is not carried in a frame's head:
// the frame's length is the body's, and a frame has no host or connection
// of its own.
func skipHeader(name string) bool {
	switch name {
	case "Content-Length", "Connection", "Transfer-Encoding", "Host", "Keep-Alive", "Te", "Trailer", "Upgrade", "Proxy-Connection":
		return true
	}
	return false
}

// appendHeader appends h's lines (values with a line break or another
// control byte have them replaced by a space: a head's line ends at "\n").
func appendHeader(dst []byte, h http.Header) []byte {
	for name, vs := range h {
		if skipHeader(name) || !validName(name) {
			continue
		}
		for _, v := range vs {
			dst = append(dst, name...)
			dst = append(dst, ':', ' ')
			for i := 0; i < len(v); i++ {
				c := v[i]
				if c < ' ' && c != '\t' || c == 0x7f {
					c = ' '
				}
				dst = append(dst, c)
			}
			dst = append(dst, '\n')
		}
	}
	return dst
}

// AppendRequestHead appends a request's head to dst: target is the
// request's path and query, percent-encoded, as in an HTTP request line.
func AppendRequestHead(dst []byte, method, target string, h http.Header) []byte {
	dst = append(dst, method...)
	dst = append(dst, ' ')
	dst = append(dst, target...)
	dst = append(dst, '\n')
	return appendHeader(dst, h)
}

// AppendAnswerHead appends an answer's head to dst.
func AppendAnswerHead(dst []byte, status int, h http.Header) []byte {
	dst = strconv.AppendInt(dst, int64(status), 10)
	dst = append(dst, '\n')
	return appendHeader(dst, h)
}

// isTchar reports whether c may be in an HTTP token (RFC 9110 5.6.2).
func isTchar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return bytes.IndexByte([]byte("!#$%&'*+-.^_`|~"), c) >= 0
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isTchar(s[i]) {
			return false
		}
	}
	return true
}

// splitHead splits head into its first line and the rest, checking that
// it is UTF-8 and ends with a line break.
func splitHead(head []byte) (first, rest []byte, err error) {
	if len(head) == 0 || head[len(head)-1] != '\n' {
		return nil, nil, fmt.Errorf("%w: it does not end with a line break", ErrHead)
	}
	if !utf8.Valid(head) {
		return nil, nil, fmt.Errorf("%w: it is not UTF-8", ErrHead)
	}
	i := bytes.IndexByte(head, '\n')
	return head[:i], head[i+1:], nil
}

// parseHeader parses "Name: value\n" lines into an http.Header, names
// canonical. Headers a frame does not carry (Content-Length, Host,
// Connection, Transfer-Encoding, ...) are dropped.
func parseHeader(rest []byte) (http.Header, error) {
	h := make(http.Header, bytes.Count(rest, []byte{'\n'}))
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, '\n')
		line := rest[:i]
		rest = rest[i+1:]
		c := bytes.IndexByte(line, ':')
		if c <= 0 || !validName(string(line[:c])) {
			return nil, fmt.Errorf("%w: the line %q is not \"Name: value\"", ErrHead, clip(line))
		}
		v := bytes.Trim(line[c+1:], " \t")
		for _, b := range v {
			if b < ' ' && b != '\t' || b == 0x7f {
				return nil, fmt.Errorf("%w: the value of %q holds the control byte %#x", ErrHead, line[:c], b)
			}
		}
		name := textproto.CanonicalMIMEHeaderKey(string(line[:c]))
		if skipHeader(name) {
			continue
		}
		h[name] = append(h[name], string(v))
	}
	return h, nil
}

func clip(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}

// ParseRequestHead parses a request's head: its method (an HTTP token),
// target (starting with "/", no space or control byte) and header.
func ParseRequestHead(head []byte) (method, target string, h http.Header, err error) {
	first, rest, err := splitHead(head)
	if err != nil {
		return "", "", nil, err
	}
	sp := bytes.IndexByte(first, ' ')
	if sp <= 0 || !validName(string(first[:sp])) {
		return "", "", nil, fmt.Errorf("%w: the first line %q is not \"METHOD TARGET\"", ErrHead, clip(first))
	}
	t := first[sp+1:]
	if len(t) == 0 || t[0] != '/' {
		return "", "", nil, fmt.Errorf("%w: the target %q does not start with \"/\"", ErrHead, clip(t))
	}
	for _, b := range t {
		if b <= ' ' || b == 0x7f {
			return "", "", nil, fmt.Errorf("%w: the target %q holds a space or control byte %#x (percent-encode it)", ErrHead, clip(t), b)
		}
	}
	if h, err = parseHeader(rest); err != nil {
		return "", "", nil, err
	}
	return string(first[:sp]), string(t), h, nil
}

// ParseAnswerHead parses an answer's head: its status (three digits) and
// header.
func ParseAnswerHead(head []byte) (status int, h http.Header, err error) {
	first, rest, err := splitHead(head)
	if err != nil {
		return 0, nil, err
	}
	if len(first) != 3 {
		return 0, nil, fmt.Errorf("%w: the status line %q is not three digits", ErrHead, clip(first))
	}
	status, err = strconv.Atoi(string(first))
	if err != nil || status < 100 {
		return 0, nil, fmt.Errorf("%w: the status line %q is not three digits", ErrHead, clip(first))
	}
	if h, err = parseHeader(rest); err != nil {
		return 0, nil, err
	}
	return status, h, nil
}
