package drill

func (wk *worker) runFenced() {
	if !wk.acquire() {
		return
	}
	wk.release()
}
