// Command printversion prints the build's description as JSON: the tests
// link it with the release's flags to see the stamp arrive.
package main

import (
	"encoding/json"
	"os"

	"github.com/vigilhq/vigil/internal/buildinfo"
)

func main() {
	json.NewEncoder(os.Stdout).Encode(buildinfo.Current())
}
