print("emberd")
