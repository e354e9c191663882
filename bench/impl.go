package main

import (
	"context"
	"errors"
	"fmt"
)

// impl is one way to hold a name on a store: lease, a peer library, a
// floor (the least a correct implementation sends), or a reference that
// is not a lease. The modes build their contenders from it.
type impl struct {
	name   string
	ref    bool // a reference only: not a lease (a session lock)
	fenced bool // try returns a fencing value that grows with each tenure
	// does says what each operation sends to the store, by mode
	// operation ("cycle", "renew", "busy").
	does map[string]string
	// open returns a handle on name for one worker (one owner).
	open func(ctx context.Context, name string) (*handle, error)
}

// handle is one owner's view of one name.
type handle struct {
	// try acquires without waiting: ok is false when another owner holds
	// the name. fence is the tenure's fencing value when the impl is
	// fenced.
	try func(ctx context.Context) (fence int64, ok bool, err error)
	// release ends the tenure try started.
	release func(ctx context.Context) error
	// renew extends it; nil for locks that do not expire.
	renew func(ctx context.Context) error
	// close frees what the handle holds (a session, a pinned connection).
	close func()
}

func (h *handle) Close() {
	if h.close != nil {
		h.close()
	}
}

var errBusy = errors.New("the name was busy")

// mustTry acquires with h and fails if the name is busy.
func mustTry(ctx context.Context, h *handle) error {
	_, ok, err := h.try(ctx)
	if err == nil && !ok {
		err = errBusy
	}
	return err
}

// contenderFor turns an impl into the contender for one operation, or
// reports false when the impl does not have it.
func contenderFor(m impl, op string) (contender, bool) {
	c := contender{impl: m.name, ref: m.ref, perOp: m.does[op]}
	if c.perOp == "" {
		return c, false
	}
	switch op {
	case "cycle":
		c.prepare = func(ctx context.Context, name string) (func(context.Context) error, func(), error) {
			h, err := m.open(ctx, name)
			if err != nil {
				return nil, nil, err
			}
			step := func(ctx context.Context) error {
				if err := mustTry(ctx, h); err != nil {
					return fmt.Errorf("acquire: %w", err)
				}
				if err := h.release(ctx); err != nil {
					return fmt.Errorf("release: %w", err)
				}
				return nil
			}
			return step, h.Close, nil
		}
	case "renew":
		c.prepare = func(ctx context.Context, name string) (func(context.Context) error, func(), error) {
			h, err := m.open(ctx, name)
			if err != nil {
				return nil, nil, err
			}
			if err := mustTry(ctx, h); err != nil {
				h.Close()
				return nil, nil, err
			}
			done := func() {
				_ = h.release(context.WithoutCancel(ctx))
				h.Close()
			}
			return h.renew, done, nil
		}
	case "busy":
		c.prepare = func(ctx context.Context, name string) (func(context.Context) error, func(), error) {
			holder, err := m.open(ctx, name)
			if err != nil {
				return nil, nil, err
			}
			if err := mustTry(ctx, holder); err != nil {
				holder.Close()
				return nil, nil, err
			}
			h, err := m.open(ctx, name)
			if err != nil {
				_ = holder.release(ctx)
				holder.Close()
				return nil, nil, err
			}
			step := func(ctx context.Context) error {
				_, ok, err := h.try(ctx)
				if err != nil {
					return err
				}
				if ok {
					_ = h.release(ctx)
					return errors.New("acquired a name another owner holds")
				}
				return nil
			}
			done := func() {
				h.Close()
				_ = holder.release(context.WithoutCancel(ctx))
				holder.Close()
			}
			return step, done, nil
		}
	default:
		return c, false
	}
	return c, true
}
