package vigil

import (
	"maps"
	"slices"
)

// Kinds returns every kind, in a stable order: what a producer may record
// and what a published schema lists.
func Kinds() []Kind { return slices.Sorted(maps.Keys(defaultSummaries)) }
