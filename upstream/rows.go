package upstream

import (
	"fmt"
	"time"

	"github.com/go-json-experiment/json"
)

// rowWriter is a format that can write a person's turn the way its agent
// records one.
type rowWriter interface {
	humanRow(text string, at time.Time) any
}

// HumanRow returns one line, line break included, recording text as a
// turn a person typed into the agent at time at, in the row shape the
// agent writes: what a simulation or a demonstration appends to a
// transcript to stand for a person at the agent's terminal. It fails for
// text that is not valid UTF-8 and for formats that do not write rows.
func HumanRow(format, text string, at time.Time) ([]byte, error) {
	f, err := Lookup(format)
	if err != nil {
		return nil, err
	}
	w, ok := f.(rowWriter)
	if !ok {
		return nil, fmt.Errorf("upstream: format %q does not write rows", format)
	}
	line, err := json.Marshal(w.humanRow(text, at))
	if err != nil {
		return nil, fmt.Errorf("upstream: human row: %w", err)
	}
	return append(line, '\n'), nil
}

func (claudeFormat) humanRow(text string, at time.Time) any {
	type message struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	return struct {
		IsSidechain bool    `json:"isSidechain"`
		UserType    string  `json:"userType"`
		Type        string  `json:"type"`
		Message     message `json:"message"`
		Timestamp   string  `json:"timestamp"`
	}{false, "external", "user", message{"user", text}, at.UTC().Format(time.RFC3339Nano)}
}

func (codexFormat) humanRow(text string, at time.Time) any {
	type part struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	type item struct {
		Type    string `json:"type"`
		Role    string `json:"role"`
		Content []part `json:"content"`
	}
	return struct {
		Timestamp string `json:"timestamp"`
		Type      string `json:"type"`
		Payload   item   `json:"payload"`
	}{at.UTC().Format(time.RFC3339Nano), "response_item", item{"message", "user", []part{{"input_text", text}}}}
}
