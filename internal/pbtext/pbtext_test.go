package pbtext

import (
	"slices"
	"testing"
)

// TestStringFieldsReadsBackWhatQuoteWrote: every byte survives the round
// trip, fields of other names and values that are no string are left out.
func TestStringFieldsReadsBackWhatQuoteWrote(t *testing.T) {
	odd := "/models/a b\"c\\d\n\x01é"
	text := "model_config_list {\n  config {\n    name: " + Quote("base_path") + "\n    base_path: " + Quote("/models/0123abcd") +
		"\n    model_platform: \"tensorflow\"\n  }\n  config {base_path:" + Quote(odd) + "}\n}\nother_base_path: \"/x\"\nbase_path: 12\n"
	got := StringFields(text, "base_path")
	if want := []string{"/models/0123abcd", odd}; !slices.Equal(got, want) {
		t.Errorf("StringFields = %q, want %q", got, want)
	}
	if got := StringFields(text, "missing"); got != nil {
		t.Errorf("a field the text lacks read as %q", got)
	}
}
