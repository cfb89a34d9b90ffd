package analysis

import (
	"fmt"
	"strings"
)

// Thousands formats n with thousands separators (16,371), as every
// figure in a diagnosis or a probe's advice is written.
func Thousands(n int) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		return "-" + s
	}
	return s
}
