package process

import (
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strings"

	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/internal/errs"
)

// LimitsOf reads the memory and CPU a task container may use: each
// resource's limit, else its request (what the SDK sends for
// `Resources(memory="200Mi")`). Values are Kubernetes quantities. A value
// that is not one is an InvalidArgument error naming the resource.
func LimitsOf(res *core.Resources) (Limits, error) {
	var l Limits
	pick := func(name core.Resources_ResourceName) string {
		for _, list := range [][]*core.Resources_ResourceEntry{res.GetLimits(), res.GetRequests()} {
			for _, e := range list {
				if e.GetName() == name && strings.TrimSpace(e.GetValue()) != "" {
					return e.GetValue()
				}
			}
		}
		return ""
	}
	if v := pick(core.Resources_MEMORY); v != "" {
		q, err := parseQuantity(v)
		if err != nil {
			return Limits{}, errs.Invalidf("the task's memory resource %q is not a quantity: %v", v, err)
		}
		l.MemoryBytes = ceilInt(q)
	}
	if v := pick(core.Resources_CPU); v != "" {
		q, err := parseQuantity(v)
		if err != nil {
			return Limits{}, errs.Invalidf("the task's cpu resource %q is not a quantity: %v", v, err)
		}
		l.CPUMillis = ceilInt(new(big.Rat).Mul(q, big.NewRat(1000, 1)))
	}
	return l, nil
}

// quantitySuffixes are the Kubernetes quantity suffixes and their factors.
var quantitySuffixes = []struct {
	s string
	f *big.Rat
}{
	{"Ki", pow(2, 10)}, {"Mi", pow(2, 20)}, {"Gi", pow(2, 30)}, {"Ti", pow(2, 40)}, {"Pi", pow(2, 50)}, {"Ei", pow(2, 60)},
	{"n", big.NewRat(1, 1e9)}, {"u", big.NewRat(1, 1e6)}, {"m", big.NewRat(1, 1000)},
	{"k", pow(10, 3)}, {"M", pow(10, 6)}, {"G", pow(10, 9)}, {"T", pow(10, 12)}, {"P", pow(10, 15)}, {"E", pow(10, 18)},
}

func pow(base, exp int64) *big.Rat {
	return new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(base), big.NewInt(exp), nil))
}

var quantityNumber = regexp.MustCompile(`^(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$`)

// parseQuantity reads "200Mi", "1.5G", "500m", "2", "1e3": a non-negative
// decimal number with an optional binary or decimal suffix or exponent.
func parseQuantity(s string) (*big.Rat, error) {
	s = strings.TrimSpace(s)
	num, factor := s, big.NewRat(1, 1)
	for _, u := range quantitySuffixes {
		if n, ok := strings.CutSuffix(s, u.s); ok {
			num, factor = n, u.f
			break
		}
	}
	r, ok := new(big.Rat).SetString(num)
	if !quantityNumber.MatchString(num) || !ok {
		return nil, fmt.Errorf("want a non-negative number with an optional unit such as Mi or G")
	}
	return r.Mul(r, factor), nil
}

// ceilInt rounds a quantity up to an integer, saturating at MaxInt64.
func ceilInt(r *big.Rat) int64 {
	q, m := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if m.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() {
		return math.MaxInt64
	}
	return q.Int64()
}
