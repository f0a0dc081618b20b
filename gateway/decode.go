package gateway

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/vigilhq/vigil/internal/quote"
)

// strict are the decoding rules for everything a caller sends: member names
// match exactly (no case folding), a name given twice is refused rather
// than the last one winning, invalid UTF-8 is refused rather than replaced,
// and unknown members are refused. These are the encoding/json/v2 semantics
// (the v2 defaults, plus RejectUnknownMembers).
var strict = jsonv2.JoinOptions(
	jsonv2.RejectUnknownMembers(true),
	jsonv2.MatchCaseInsensitiveNames(false),
	jsontext.AllowDuplicateNames(false),
	jsontext.AllowInvalidUTF8(false),
)

// DecodeStrict decodes one JSON object into v under the strict rules:
// unknown fields, fields whose names differ only in case, duplicate fields,
// invalid UTF-8, wrong types, trailing data and malformed or truncated JSON
// are refused with an error (wrapping ErrInvalid) that names the field or
// the position. An empty input and a JSON null are refused too: an object
// is required, and {} is how a caller says it has no fields to give. When
// the input breaks several rules, a syntactic one (malformed, truncated,
// duplicated, invalid UTF-8, trailing data) is reported before any about
// types or names. On an error, v may hold part of the input.
func DecodeStrict(raw []byte, v any) error {
	// Decoding null into an object is no error (it leaves the object
	// alone), so both are refused here, before the decoder sees them.
	switch trimmed := bytes.TrimSpace(raw); {
	case len(trimmed) == 0:
		return invalid("the request must be a JSON object, not empty: send {} to give no fields")
	case string(trimmed) == "null":
		return invalid("the request must be a JSON object, not null: send {} to give no fields")
	}
	// One pass decides a valid input: the decoder reads every byte of it
	// under the same options a separate syntax check would use, so an input
	// it accepts has no syntax error left to report.
	err := jsonv2.Unmarshal(raw, v, strict)
	if err == nil {
		return nil
	}
	// The decode stops at its first error, which may be a member's type or
	// name while the JSON breaks later on: the syntax of the whole input is
	// checked only then, so truncated or malformed JSON is reported as such
	// rather than as whatever member came first.
	if serr := checkSyntax(raw); serr != nil {
		return describeJSONError(serr, v)
	}
	return describeJSONError(err, v)
}

// CheckJSON checks that raw, well-formed JSON, keeps the strict rules of
// syntax: no member name given twice in any object and valid UTF-8 in
// every string (escaped surrogates in pairs), with an error wrapping
// ErrInvalid that names the member. It is for a transport whose envelope
// another decoder reads, which would take the last of two members and
// replace invalid bytes; names, types and malformed JSON are left to
// that decoder. A breach within the member at the JSON pointer inner
// (such as "/params/arguments"; "" for none) is left to whoever decodes
// that member strictly, to word as it words every refusal.
func CheckJSON(raw []byte, inner string) error {
	err := checkSyntax(raw)
	var syntax *jsontext.SyntacticError
	if err == nil || (inner != "" && errors.As(err, &syntax) && strings.HasPrefix(string(syntax.JSONPointer), inner+"/")) {
		return nil
	}
	return describeJSONError(err, nil)
}

// checkSyntax reads the whole input as one JSON value under the strict
// rules, decoding it into nothing of the caller's. It runs only for input
// already refused, so its copy of the value costs a valid call nothing.
func checkSyntax(raw []byte) error {
	var whole jsontext.Value
	return jsonv2.Unmarshal(raw, &whole, strict)
}

func describeJSONError(err error, v any) error {
	var syntax *jsontext.SyntacticError
	var sem *jsonv2.SemanticError
	switch {
	case errors.As(err, &syntax):
		where := fieldName(syntax.JSONPointer)
		switch {
		case errors.Is(syntax.Err, jsontext.ErrDuplicateName):
			return invalid("field %s is given more than once", fieldName(syntax.JSONPointer))
		case syntax.Err != nil && strings.Contains(syntax.Err.Error(), "invalid UTF-8"):
			if where == "" {
				return invalid("the request is not valid UTF-8 (at byte %d)", syntax.ByteOffset)
			}
			return invalid("field %s: not valid UTF-8", where)
		case syntax.Err != nil && strings.Contains(syntax.Err.Error(), "invalid surrogate pair"):
			// What a client of a language with UTF-16 strings sends for
			// text that is not valid Unicode: invalid UTF-8, escaped.
			if where == "" {
				return invalid("the request is not valid Unicode: an escaped UTF-16 surrogate without its pair (at byte %d)", syntax.ByteOffset)
			}
			return invalid("field %s: not valid Unicode: an escaped UTF-16 surrogate without its pair", where)
		case where != "" && syntax.Err != nil && strings.Contains(syntax.Err.Error(), "invalid escape sequence"):
			return invalid("field %s: %v", where, syntax.Err)
		case errors.Is(syntax.Err, io.ErrUnexpectedEOF):
			return invalid("truncated JSON: the object ends too early")
		case syntax.Err != nil && strings.HasPrefix(syntax.Err.Error(), "unexpected EOF"):
			return invalid("truncated JSON: the object ends too early")
		case syntax.Err != nil && strings.Contains(syntax.Err.Error(), "after top-level value"):
			return invalid("unexpected data after the JSON object")
		}
		return invalid("malformed JSON at byte %d: %v", syntax.ByteOffset, syntax.Err)
	case errors.As(err, &sem):
		field := fieldName(sem.JSONPointer)
		if errors.Is(sem.Err, jsonv2.ErrUnknownName) {
			name := sem.JSONPointer.LastToken()
			if known := caseFold(v, name, sem.JSONPointer.Parent()); known != "" {
				return invalid("unknown field %s: field names are case-sensitive (did you mean %q?)", quote.Bounded(name), known)
			}
			return invalid("unknown field %s", quote.Bounded(name))
		}
		got := kindName(sem.JSONKind, sem.JSONValue)
		if field == "" {
			return invalid("the request must be a JSON object, not %s", got)
		}
		if sem.GoType == nil {
			return invalid("field %s: %v", field, sem.Err)
		}
		return invalid("field %s: expected %s, got %s", field, jsonType(sem.GoType), got)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return invalid("truncated JSON: the object ends too early")
	}
	return invalid("%v", err)
}

// fieldName spells a JSON pointer as the dotted path callers write; a
// long one, which no field of a tool's has, is shown quoted and bounded.
func fieldName(p jsontext.Pointer) string {
	var parts []string
	for tok := range p.Tokens() {
		parts = append(parts, tok)
	}
	name := strings.Join(parts, ".")
	if len(name) > quote.MaxBytes {
		return quote.Bounded(name)
	}
	return name
}

func kindName(k jsontext.Kind, value jsontext.Value) string {
	switch k {
	case '"':
		return "string"
	case '0':
		if len(value) > quote.MaxBytes {
			return "number " + string(value[:quote.MaxBytes]) + "... (" + strconv.Itoa(len(value)) + " digits)"
		}
		if len(value) > 0 {
			return "number " + string(value)
		}
		return "number"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	case '[':
		return "array"
	case '{':
		return "object"
	}
	return "a value of another type"
}

func jsonType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}

// caseFold finds the field of the object at parent (within v's type) whose
// name differs from name only in case, so the error can point at it.
func caseFold(v any, name string, parent jsontext.Pointer) string {
	t := reflect.TypeOf(v)
	for tok := range parent.Tokens() {
		t = structOf(t)
		if t == nil {
			return ""
		}
		f, ok := fieldByJSONName(t, tok)
		if !ok {
			return ""
		}
		t = f.Type
	}
	t = structOf(t)
	if t == nil {
		return ""
	}
	for i := range t.NumField() {
		if n := jsonName(t.Field(i)); n != "" && n != name && strings.EqualFold(n, name) {
			return n
		}
	}
	return ""
}

func structOf(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	return t
}

func fieldByJSONName(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		if f := t.Field(i); jsonName(f) == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func jsonName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	switch tag {
	case "-":
		return ""
	case "":
		return f.Name
	}
	return tag
}
