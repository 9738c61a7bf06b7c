package main

import "math/rand/v2"

// roundOrders gives, for each of rounds rounds, the order its n tools run
// in: a shuffle, seeded so that a set's order can be repeated. Turning the
// order one place each round let every tool start a round in turn, but ran
// each right after the same tool in every round. For an hour on one day's
// VM, 40 of 42 runs of the first tool of the list (ours) on the 1 GiB file
// were slow, against a third of the others': it always ran right after the
// last tool of the list, s5cmd.
func roundOrders(n, rounds int, seed uint64) [][]int {
	r := rand.New(rand.NewPCG(seed, 0))
	orders := make([][]int, rounds)
	for i := range orders {
		orders[i] = r.Perm(n)
	}
	return orders
}
