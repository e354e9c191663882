package sqllease

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"modernc.org/sqlite"

	"github.com/leasekit/lease"
)

// childEnv makes the test binary act as the second process of
// TestSQLiteTwoProcesses: its value is the SQLite file to hammer.
const childEnv = "LEASE_SQL_TEST_CHILD_FILE"

// TestSQLiteTwoProcesses runs two real processes (this test binary twice)
// with 16 goroutines each against one SQLite file, all taking turns on
// the same few names. No call may fail with anything but ErrHeld, and
// the tokens that both processes were granted for one name must all be
// distinct (tokens are per name: two names may share one).
func TestSQLiteTwoProcesses(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("running as the child process")
	}
	t.Parallel()
	path := filepath.Join(t.TempDir(), "shared.db")
	// Create the table first so both processes start on equal terms.
	first, err := openFile(path)
	if err != nil {
		t.Fatal(err)
	}
	first.Close()

	cmd := exec.Command(os.Args[0], "-test.run=^TestSQLiteChildProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+path)
	var childOut strings.Builder
	cmd.Stdout = &childOut
	cmd.Stderr = &childOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	mine, attempts, err := hammer(path, "parent")
	if err != nil {
		t.Error(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child process: %v\n%s", err, childOut.String())
	}
	var theirs []grant
	for _, line := range strings.Split(childOut.String(), "\n") {
		if v, ok := strings.CutPrefix(line, "TOKEN "); ok {
			name, tok, _ := strings.Cut(strings.TrimSpace(v), " ")
			n, err := strconv.ParseUint(tok, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			theirs = append(theirs, grant{name, n})
		}
	}
	if len(mine) == 0 || len(theirs) == 0 {
		t.Fatalf("parent won %d tenures, child %d: both should win some\n%s", len(mine), len(theirs), childOut.String())
	}
	all := append(append([]grant{}, mine...), theirs...)
	sort.Slice(all, func(i, j int) bool {
		if all[i].name != all[j].name {
			return all[i].name < all[j].name
		}
		return all[i].token < all[j].token
	})
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			t.Fatalf("%q: token %d was granted twice", all[i].name, all[i].token)
		}
	}
	t.Logf("in 1s the parent made %d Acquires and won %d, the child won %d; no token granted twice for a name", attempts, len(mine), len(theirs))
}

// TestSQLiteChildProcess is the second process of TestSQLiteTwoProcesses.
func TestSQLiteChildProcess(t *testing.T) {
	path := os.Getenv(childEnv)
	if path == "" {
		t.Skip("only run as TestSQLiteTwoProcesses' child")
	}
	tokens, _, err := hammer(path, "child")
	for _, g := range tokens {
		fmt.Printf("TOKEN %s %d\n", g.name, g.token)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// grant is one tenure a process won.
type grant struct {
	name  string
	token uint64
}

// hammer runs 16 goroutines that acquire, renew and release 4 shared
// names for a second, and returns the tokens it was granted and how many
// Acquires it made.
func hammer(path, who string) ([]grant, int, error) {
	l, err := openFile(path)
	if err != nil {
		return nil, 0, err
	}
	defer l.Close()
	ctx := context.Background()
	var (
		mu       sync.Mutex
		tokens   []grant
		errs     []error
		attempts int
		wg       sync.WaitGroup
	)
	stop := time.Now().Add(time.Second)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			owner := fmt.Sprintf("%s-%d", who, g)
			for i := 0; time.Now().Before(stop); i++ {
				name := fmt.Sprintf("shared-%d", i%4)
				got, err := l.Acquire(ctx, name, owner, 10*time.Second)
				mu.Lock()
				attempts++
				mu.Unlock()
				if errors.Is(err, lease.ErrHeld) {
					continue
				}
				if err == nil {
					mu.Lock()
					tokens = append(tokens, grant{name, got.Token})
					mu.Unlock()
					if got, err = l.Renew(ctx, got, 10*time.Second); err == nil {
						err = l.Release(ctx, got)
					}
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("%s: %w", owner, err))
					mu.Unlock()
					return
				}
			}
		}(g)
	}
	wg.Wait()
	return tokens, attempts, errors.Join(errs...)
}

// openFile opens a Locker with its own pool on the SQLite file at path, as
// backend/sql/sqlite's Open does.
func openFile(path string) (*Locker, error) {
	c, err := sqlite.NewConnector(sqliteDSN(path))
	if err != nil {
		return nil, err
	}
	return OpenConnector(context.Background(), c)
}
