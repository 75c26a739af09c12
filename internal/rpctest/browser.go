package rpctest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Browser speaks Connect JSON to a manager as a web console does: unary
// calls are POSTs of application/json, server streams are
// application/connect+json envelopes over one fetch.
type Browser struct {
	T    testing.TB
	Base string // the manager's URL
	// Client makes the unary calls (http.DefaultClient if nil). Streams
	// use http.DefaultClient: a client timeout would cut them.
	Client *http.Client
}

// Call makes a unary call and decodes the answer into resp; a Connect
// error is returned as its code ("not_found", ...).
func (b Browser) Call(procedure string, req, resp proto.Message) (code string) {
	code, _ = b.CallMessage(procedure, req, resp)
	return code
}

// CallMessage is Call that also returns the Connect error's message.
func (b Browser) CallMessage(procedure string, req, resp proto.Message) (code, message string) {
	b.T.Helper()
	body, err := protojson.Marshal(req)
	if err != nil {
		b.T.Fatal(err)
	}
	return b.CallJSON(procedure, body, resp)
}

// CallJSON is CallMessage with the request body as written (the exact JSON
// a console sends).
func (b Browser) CallJSON(procedure string, body []byte, resp proto.Message) (code, message string) {
	b.T.Helper()
	r, err := http.NewRequest(http.MethodPost, b.Base+"/"+procedure, bytes.NewReader(body))
	if err != nil {
		b.T.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Connect-Protocol-Version", "1")
	client := b.Client
	if client == nil {
		client = http.DefaultClient
	}
	res, err := client.Do(r)
	if err != nil {
		b.T.Fatalf("%s: %v", procedure, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		b.T.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		var e struct{ Code, Message string }
		if err := json.Unmarshal(raw, &e); err != nil || e.Code == "" {
			b.T.Fatalf("%s: HTTP %d with %q, not a Connect error", procedure, res.StatusCode, raw)
		}
		return e.Code, e.Message
	}
	if err := (protojson.UnmarshalOptions{}).Unmarshal(raw, resp); err != nil {
		b.T.Fatalf("%s: answer %q: %v", procedure, raw, err)
	}
	return "", ""
}

// Must is Call that fails the test on any error.
func (b Browser) Must(procedure string, req, resp proto.Message) {
	b.T.Helper()
	if code, msg := b.CallMessage(procedure, req, resp); code != "" {
		b.T.Fatalf("%s: %s: %s", procedure, code, msg)
	}
}

// Stream opens a server stream; each message is decoded by newMsg's
// message, and handed to until, which returns true to stop reading.
func (b Browser) Stream(procedure string, req proto.Message, newMsg func() proto.Message, until func(proto.Message) bool) {
	b.T.Helper()
	body, err := protojson.Marshal(req)
	if err != nil {
		b.T.Fatal(err)
	}
	b.StreamJSON(procedure, body, newMsg, until)
}

// StreamJSON is Stream with the request body as written.
func (b Browser) StreamJSON(procedure string, body []byte, newMsg func() proto.Message, until func(proto.Message) bool) {
	b.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var env bytes.Buffer
	env.WriteByte(0)
	_ = binary.Write(&env, binary.BigEndian, uint32(len(body)))
	env.Write(body)
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, b.Base+"/"+procedure, &env)
	if err != nil {
		b.T.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/connect+json")
	r.Header.Set("Connect-Protocol-Version", "1")
	res, err := http.DefaultClient.Do(r) // no client timeout: a stream stays open
	if err != nil {
		b.T.Fatalf("%s: %v", procedure, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/connect+json" {
		b.T.Fatalf("%s: HTTP %d %s", procedure, res.StatusCode, res.Header.Get("Content-Type"))
	}
	rd := bufio.NewReader(res.Body)
	for {
		var head [5]byte
		if _, err := io.ReadFull(rd, head[:]); err != nil {
			b.T.Fatalf("%s: the stream ended before the awaited message: %v", procedure, err)
		}
		msg := make([]byte, binary.BigEndian.Uint32(head[1:]))
		if _, err := io.ReadFull(rd, msg); err != nil {
			b.T.Fatal(err)
		}
		if head[0]&2 != 0 { // end of stream
			b.T.Fatalf("%s: the stream ended before the awaited message: %s", procedure, msg)
		}
		m := newMsg()
		if err := protojson.Unmarshal(msg, m); err != nil {
			b.T.Fatalf("%s: message %q: %v", procedure, msg, err)
		}
		if until(m) {
			return
		}
	}
}
