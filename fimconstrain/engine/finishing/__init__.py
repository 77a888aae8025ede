"""The budget finish: a short text that closes what a middle opened and bridges it into the
suffix (the shortest finish, closings, bridges).
"""
