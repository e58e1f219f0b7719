package store

// RestoreSlack is how far etcd's revision − applied raft index may exceed
// the realm origin's before coordinator's CheckOrigin calls it a restore:
// it absorbs entries applied between the reads of one status answer. A
// snapshot taken at a revision less than about RestoreSlack past the
// cluster's raft index is not detected.
const RestoreSlack = 256
