"""What people do with answers: the review queue, exports, router-path statistics."""
