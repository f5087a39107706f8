package verbs

// EventCollector is the collecting half of an EventWaiter, the same in
// every provider: WaitPoll hands it the caller's slice, the polls of the
// provider's wait fill it from the channel's Next, and a wait that ends
// with nothing (woken) collects once more before it returns.
type EventCollector struct {
	next func() (Event, bool, error)
	evs  []Event // the WaitPoll in progress collects into these
	n    int
}

// Init sets the channel's Next, which Poll collects from.
func (c *EventCollector) Init(next func() (Event, bool, error)) { c.next = next }

// WaitPoll collects into evs while wait runs (the provider's wait, whose
// polls call Poll), and once more if wait returned nothing and no error:
// a Wake, with events queued that the channel did not show.
func (c *EventCollector) WaitPoll(evs []Event, wait func() (int, error)) (int, error) {
	c.evs, c.n = evs, 0
	n, err := wait()
	if err == nil && n == 0 {
		n, err = c.Poll()
	}
	c.evs = nil
	return n, err
}

// Poll moves events from Next into the slice WaitPoll was given, until
// it is full or Next has none, and reports how many it holds now.
func (c *EventCollector) Poll() (int, error) {
	for c.n < len(c.evs) {
		ev, ok, err := c.next()
		if err != nil {
			return c.n, err
		}
		if !ok {
			break
		}
		c.evs[c.n] = ev
		c.n++
	}
	return c.n, nil
}
