package main

import (
	"testing"

	"github.com/vigilhq/vigil/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.Main(m) }
