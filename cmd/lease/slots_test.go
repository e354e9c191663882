package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/leasekit/lease/semaphore"
)

// lease run --slots N: at most N commands at once, each told its slot
// and its slot's lease and token; a third is turned away as busy, and
// one that waits gets a freed slot. status --slots and list show the
// holders.
func TestRunSlots(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, backend string) {
		dir := t.TempDir()
		env := []string{"LEASE_BACKEND=" + backend, "DIR=" + dir}
		name := uniqueName(t)
		var holders []*proc
		for i := range 2 {
			holders = append(holders, start(t, leaseBin, env, "run", "--slots", "2", "--ttl", "10s", name, "--", "sh", "-c",
				fmt.Sprintf(`echo "$LEASE_SLOT|$LEASE_NAME|$LEASE_TOKEN" > "$DIR/h%d.tmp"; mv "$DIR/h%d.tmp" "$DIR/h%d"; while [ ! -e "$DIR/stop" ]; do sleep 0.05; done`, i, i, i)))
		}
		slots := map[int]uint64{}
		for i := range 2 {
			path := filepath.Join(dir, fmt.Sprintf("h%d", i))
			waitFor(t, "holder "+strconv.Itoa(i)+" to start", func() bool { return fileExists(path) })
			f := strings.Split(readFile(t, path), "|")
			if len(f) != 3 {
				t.Fatalf("holder %d printed %q, want SLOT|NAME|TOKEN", i, f)
			}
			slot, err := strconv.Atoi(f[0])
			if err != nil || slot < 0 || slot > 1 {
				t.Fatalf("holder %d: LEASE_SLOT=%q, want 0 or 1", i, f[0])
			}
			if f[1] != semaphore.SlotName(name, slot) {
				t.Errorf("holder %d: LEASE_NAME=%q, want its slot's lease %q", i, f[1], semaphore.SlotName(name, slot))
			}
			tok, err := strconv.ParseUint(f[2], 10, 64)
			if err != nil || tok == 0 {
				t.Errorf("holder %d: LEASE_TOKEN=%q is not a positive integer", i, f[2])
			}
			slots[slot] = tok
		}
		if len(slots) != 2 {
			t.Fatalf("the two holders share a slot: %v", slots)
		}

		res := runLease(t, env, "run", "--slots", "2", name, "--", "true")
		if res.code != exitBusyDflt || !oneLineWith(res.stderr, "busy", "all 2 slots are held") {
			t.Errorf("a third lease run --slots 2: want exit %d and one line saying every slot is held\n%s", exitBusyDflt, res)
		}
		res = runLease(t, env, "run", "--slots", "1", name, "--", "true")
		if res.code != exitBusyDflt || !oneLineWith(res.stderr, "all 1 slots are held") {
			t.Errorf("lease run --slots 1 while slot 0 is held: want exit %d\n%s", exitBusyDflt, res)
		}

		res = runLease(t, env, "status", "--slots", "2", name)
		if res.code != 0 || !strings.Contains(res.stdout, "2 of 2 slots held") || !strings.Contains(res.stdout, "slot 0: held by") || !strings.Contains(res.stdout, "slot 1: held by") {
			t.Errorf("status --slots 2: want both slots shown\n%s", res)
		}
		for slot, tok := range slots {
			if !strings.Contains(res.stdout, fmt.Sprintf("token %d,", tok)) {
				t.Errorf("status --slots 2 does not show slot %d's token %d\n%s", slot, tok, res)
			}
		}
		res = runLease(t, env, "status", "--slots", "2", "--json", name)
		var v struct {
			Name    string `json:"name"`
			Slots   int    `json:"slots"`
			Held    int    `json:"held"`
			Holders []struct {
				Slot  int    `json:"slot"`
				Name  string `json:"name"`
				Token uint64 `json:"token"`
				Owner string `json:"owner"`
			} `json:"holders"`
		}
		if err := json.Unmarshal([]byte(res.stdout), &v); err != nil || res.code != 0 {
			t.Fatalf("status --slots 2 --json: %v\n%s", err, res)
		}
		if v.Name != name || v.Slots != 2 || v.Held != 2 || len(v.Holders) != 2 {
			t.Errorf("status --slots 2 --json: got %+v", v)
		}
		for _, h := range v.Holders {
			if h.Name != semaphore.SlotName(name, h.Slot) || h.Token != slots[h.Slot] || h.Owner == "" {
				t.Errorf("status --slots 2 --json: holder %+v; want slot %d's lease with token %d", h, h.Slot, slots[h.Slot])
			}
		}
		res = runLease(t, env, "list", semaphore.Prefix+name+"#")
		for slot := range slots {
			if res.code != 0 || !strings.Contains(res.stdout, semaphore.SlotName(name, slot)) {
				t.Errorf("list %s#: want slot %d's lease listed\n%s", semaphore.Prefix+name, slot, res)
			}
		}

		waiter := start(t, leaseBin, env, "run", "--slots", "2", "--wait", "1m", name, "--", "sh", "-c", `echo "$LEASE_SLOT" > "$DIR/w"`)
		if err := os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		for i, h := range holders {
			if res := h.wait(t); res.code != 0 {
				t.Errorf("holder %d: want exit 0\n%s", i, res)
			}
		}
		if res := waiter.wait(t); res.code != 0 {
			t.Fatalf("the waiter: want exit 0\n%s", res)
		}
		if got := readFile(t, filepath.Join(dir, "w")); got != "0" && got != "1" {
			t.Errorf("the waiter ran with LEASE_SLOT=%q, want 0 or 1", got)
		}
		res = runLease(t, env, "status", "--slots", "2", name)
		if res.code != exitNotHeld || !strings.Contains(res.stdout, "0 of 2 slots held") {
			t.Errorf("status --slots 2 after every holder exited: want exit %d, none held\n%s", exitNotHeld, res)
		}
	})
}
